// A node's counters since its process started (lease changes, takeovers, calls between nodes),
// written with each heartbeat (cluster_nodes.counters, leases.ts) so that any node's status shows
// every node's. Pure data and its schema: the status edge reads it on a single node too, where
// nothing of PostgreSQL or NATS may load (test/integration/start-imports.test.ts).
import { z } from 'zod';

const count = z.number().int().nonnegative();
/** A node's figures since its process started, written with each heartbeat (cluster_nodes.counters):
 *  what it did with leases, and with account calls between nodes. */
export const NodeCounters = z.object({
  leases: z.object({ acquired: count, handedOver: count, lost: count, takeovers: count }),
  calls: z.object({ forwarded: count, served: count, unavailable: count, ownerWaits: count }),
});
export type NodeCounters = z.infer<typeof NodeCounters>;

/** The counters from the lease keeper's and the router's figures (their own names: `released` is a
 *  handover). */
export function nodeCounters(
  leases: { acquired: number; released: number; lost: number; takeovers: number },
  calls: { forwarded: number; served: number; unavailable: number; ownerWaits: number },
): NodeCounters {
  return {
    leases: { acquired: leases.acquired, handedOver: leases.released, lost: leases.lost, takeovers: leases.takeovers },
    calls: { forwarded: calls.forwarded, served: calls.served, unavailable: calls.unavailable, ownerWaits: calls.ownerWaits },
  };
}

/** A row's counters as this build reads them: another build's shape, or none, is null (not an error:
 *  the status shows what the node did not say as unknown). */
export function countersOf(json: unknown): NodeCounters | null {
  const r = NodeCounters.safeParse(json);
  return r.success ? r.data : null;
}
