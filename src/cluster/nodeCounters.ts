// A node's counters since its process started (lease changes, takeovers, calls between nodes),
// written with each heartbeat (cluster_nodes.counters, leases.ts) so that any node's status shows
// every node's. Pure data and its schema: the status edge reads it on a single node too, where
// nothing of PostgreSQL or NATS may load (test/integration/start-imports.test.ts).
import { z } from 'zod';

const count = (what: string) => z.number().int().nonnegative().describe(what);
/** A node's lease changes since its process started (also /v1/status's shape of them). */
export const LeaseCounts = z.object({
  acquired: count('Leases the node acquired since it started'),
  handedOver: count('Leases the node released to another node (a handover)'),
  lost: count('Leases the node lost (not renewed in time)'),
  takeovers: count('Accounts the node acquired that another node (or an earlier lease) had held'),
});
/** Account calls between nodes, counted on a node since its process started (also /v1/status's). */
export const CallCounts = z.object({
  forwarded: count('Account calls the node forwarded to their owner'),
  served: count('Account calls the node served for another node'),
  unavailable: count('Account calls answered 503 (no owner reachable in time, or NATS down)'),
  ownerWaits: count('Account calls that waited for an owner (a takeover)'),
});
/** A node's figures since its process started, written with each heartbeat (cluster_nodes.counters):
 *  what it did with leases, and with account calls between nodes. */
export const NodeCounters = z.object({ leases: LeaseCounts, calls: CallCounts });
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
