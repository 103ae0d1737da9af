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
  takeovers: count('Accounts the node acquired that another node (or an earlier lease) had held: takeoversExpired + takeoversHandover'),
  takeoversExpired: count('Of the takeovers, those of a lease that ran out unreleased: its holder died (SIGKILL, a crash) or could not renew it; also one taken back from an earlier process of the same NODE_ID. Absent from an older build\'s heartbeat').optional(),
  takeoversHandover: count('Of the takeovers, those of a lease its holder released: an orderly handover (SIGTERM in a rolling restart, a rebalance, a node stepping down). Absent from an older build\'s heartbeat').optional(),
});
/** Account calls between nodes, counted on a node since its process started (also /v1/status's). */
export const CallCounts = z.object({
  forwarded: count('Account calls the node forwarded to their owner'),
  served: count('Account calls the node served for another node'),
  unavailable: count('Account calls answered 503 (no owner reachable in time, or NATS down)'),
  ownerWaits: count('Account calls that waited for an owner (a takeover)'),
});
/** One of a node's quote sessions (QUOTE_LOGINS_FILE, docs/cluster.md "Quote sessions"): its
 *  broker server's market-data login, never the password. */
export const QuoteSessionStatus = z.object({
  server: z.string().describe('The broker server'),
  login: z.string().describe('The quote login (QUOTE_LOGINS_FILE; never its password)'),
  state: z.enum(['connecting', 'up', 'down', 'refused']).describe('connecting (its first login), up, down (dropped or not reached: trying again), refused (the broker refused the login: not tried again until the shard restarts)'),
  since: z.string().describe('When it entered that state (ISO 8601, UTC, the node\'s clock)'),
  symbols: z.array(z.string()).describe('Symbols of the server the node follows through it (refused: those the relay serves instead)'),
  quotes: count('Quotes of followed symbols received from the session since the node\'s shard started'),
  quotesFrom: z.enum(['session', 'relay']).describe('session: the node takes the server\'s quotes from the session alone (it keeps up: the owners withhold their relayed copies); relay: the owners\' relay sends them too, the fallback while the session is connecting, down, refused or behind'),
});
export type QuoteSessionStatus = z.infer<typeof QuoteSessionStatus>;

/** A node's figures since its process started, written with each heartbeat (cluster_nodes.counters):
 *  what it did with leases, and with account calls between nodes; and its quote sessions now
 *  (absent from an older build's; another shape of them, a newer build's, is read as absent). */
export const NodeCounters = z.object({ leases: LeaseCounts, calls: CallCounts, quoteSessions: z.array(QuoteSessionStatus).optional().catch(undefined) });
export type NodeCounters = z.infer<typeof NodeCounters>;

/** The counters from the lease keeper's and the router's figures (their own names: `released` is a
 *  handover). */
export function nodeCounters(
  leases: { acquired: number; released: number; lost: number; takeovers: number; takeoversExpired: number; takeoversHandover: number },
  calls: { forwarded: number; served: number; unavailable: number; ownerWaits: number },
  quoteSessions?: QuoteSessionStatus[],
): NodeCounters {
  return {
    leases: {
      acquired: leases.acquired, handedOver: leases.released, lost: leases.lost,
      takeovers: leases.takeovers, takeoversExpired: leases.takeoversExpired, takeoversHandover: leases.takeoversHandover,
    },
    calls: { forwarded: calls.forwarded, served: calls.served, unavailable: calls.unavailable, ownerWaits: calls.ownerWaits },
    ...(quoteSessions ? { quoteSessions } : {}),
  };
}

/** A row's counters as this build reads them: another build's shape, or none, is null (not an error:
 *  the status shows what the node did not say as unknown). */
export function countersOf(json: unknown): NodeCounters | null {
  const r = NodeCounters.safeParse(json);
  return r.success ? r.data : null;
}
