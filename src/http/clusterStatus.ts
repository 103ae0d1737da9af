// What cluster mode adds to /metrics and /v1/status (docs/cluster.md): live nodes, accounts owned
// here, lease changes, forwarded calls and takeovers: this node's now, and every node's as its last
// heartbeat wrote them; and its quote sessions (QUOTE_LOGINS_FILE). Nothing is registered on a single node.
import { z } from 'zod';
import type { ClusterNode, ClusterStatus } from '../cluster/clusterNode.js';
import type { NodeRow } from '../cluster/leases.js';
import { CallCounts, LeaseCounts, nodeCounters, QuoteSessionStatus } from '../cluster/nodeCounters.js';
import type { Metrics } from './metrics.js';

export function registerClusterMetrics(metrics: Metrics, node: ClusterNode): void {
  const st = () => node.status();
  metrics.gauge('tagw_cluster_nodes_live', () => node.liveNodes().length, 'Cluster nodes whose heartbeat is younger than the lease (as last read from PostgreSQL).');
  metrics.gauge('tagw_cluster_accounts_owned', () => st().ownedHere, 'Accounts whose lease this node holds.');
  metrics.gauge('tagw_cluster_accounts_unowned', () => node.unowned(), 'Accounts no node holds now (a takeover in progress).');
  metrics.gauge('tagw_cluster_nats_up', () => (st().natsUp ? 1 : 0), 'Whether this node is connected to NATS.');
  metrics.gauge('tagw_cluster_stepped_down', () => (st().steppedDown ? 1 : 0), 'Whether this node stepped down: cut off from NATS past CLUSTER_STEP_DOWN_MS while other nodes reach it, it handed its accounts over and takes none until its link is back.');
  metrics.labeledCounter('tagw_cluster_leases_total', ['event'], () => {
    const l = st().leases;
    return [[['acquired'], l.acquired], [['handed_over'], l.released], [['lost'], l.lost]];
  }, 'Lease changes on this node: acquired, handed over (released to another node), lost (not renewed in time).');
  metrics.gauge('tagw_cluster_audit_outbox_rows', () => node.auditPending(), 'Audit rows not in PostgreSQL yet: kept in this node\'s SQLite while it was unreachable, written when it is back (or at the node\'s next start).');
  metrics.labeledCounter('tagw_cluster_takeovers_total', ['reason'], () => {
    const l = st().leases;
    return [[['expired'], l.takeoversExpired], [['handover'], l.takeoversHandover]];
  }, 'Accounts this node acquired that another node (or an earlier lease) had held, by how that lease ended: expired (ran out unreleased: its holder died or could not renew) or handover (released by its holder: SIGTERM, a rebalance, stepping down). Summed: every takeover.');
  metrics.labeledGauge('tagw_cluster_followed_symbols', 'source', () => {
    const { wanted, served, quoted } = node.nearCounts();
    return { near: served - quoted, quote: quoted, relay_only: wanted - served };
  }, 'Symbols (of a server) this node\'s sockets follow on accounts other nodes own: served by an account of the same server running here too (near), by this node\'s quote session of the server (quote: its market-data login, QUOTE_LOGINS_FILE), or by the owner\'s relay alone.');
  metrics.gauge('tagw_cluster_near_quiet_symbols', () => node.nearCounts().quiet, 'Followed symbols this node told the owners it is quiet for: its near source delivers their ticks in time, so an owner may withhold its relayed copies (it does when every node wanting them is quiet) and send a pulse (the latest tick time) instead.');
  metrics.counter('tagw_cluster_near_stalls_total', () => node.nearCounts().stalls, 'Times a quiet symbol\'s near source was found behind the owner\'s pulses: its relayed copies were asked for again.');
  metrics.counter('tagw_cluster_relay_ticks_withheld_total', () => st().relay.withheld, 'Ticks this node did not relay: every node wanting them said its near source delivers them in time (a pulse went out instead).');
  registerQuoteSessionMetrics(metrics, () => node.quoteSessionsSeen());
  metrics.labeledCounter('tagw_cluster_calls_total', ['outcome'], () => {
    const r = st().routing;
    return [[['forwarded'], r.forwarded], [['served'], r.served], [['unavailable'], r.unavailable], [['owner_wait'], r.ownerWaits]];
  }, 'Account calls between nodes: forwarded to the owner, served for another node, answered 503 (no owner reachable in time, or NATS down), waited for an owner.');
}

const QUOTE_STATES = QuoteSessionStatus.shape.state.options;

/** This node's quote sessions (QUOTE_LOGINS_FILE), as last read from its shards (each second). */
function registerQuoteSessionMetrics(metrics: Metrics, seen: () => QuoteSessionStatus[]): void {
  metrics.gaugeSeries('tagw_cluster_quote_session_state', ['server', 'login', 'state'], () => seen().flatMap((q) => QUOTE_STATES.map((state): [string[], number] => [[q.server, q.login, state], q.state === state ? 1 : 0])),
    'This node\'s quote session of a broker server (its market-data login, QUOTE_LOGINS_FILE): 1 for its state now (connecting, up, down: dropped or not reached, trying again; refused: the broker refused the login), 0 for the others.');
  metrics.gaugeSeries('tagw_cluster_quote_session_state_time_seconds', ['server'], () => seen().map((q) => [[q.server], Date.parse(q.since) / 1000]),
    'When the quote session entered its state now (Unix time, seconds).');
  metrics.gaugeSeries('tagw_cluster_quote_session_symbols', ['server'], () => seen().map((q) => [[q.server], q.symbols.length]),
    'Symbols of the server this node follows through its quote session (refused: those the owners\' relay serves instead).');
  metrics.labeledCounter('tagw_cluster_quote_session_quotes_total', ['server'], () => seen().map((q) => [[q.server], q.quotes]),
    'Quotes of followed symbols this node\'s quote sessions of the server received (since its shard started).');
  metrics.gaugeSeries('tagw_cluster_quote_session_relay', ['server'], () => seen().map((q) => [[q.server], q.quotesFrom === 'relay' ? 1 : 0]),
    'Whether this node takes the server\'s quotes from the owners\' relay too (1: the fallback, its quote session connecting, down, refused or behind) or from its quote session alone (0).');
}

export const ClusterStatusBody = z.object({
  nodeId: z.string(),
  natsUp: z.boolean(),
  steppedDown: z.boolean().describe('Cut off from NATS past CLUSTER_STEP_DOWN_MS while other nodes reach it: this node handed its accounts over and takes none until its link is back (tagw_cluster_stepped_down)'),
  ownedHere: z.number().int().describe('Accounts whose lease this node holds'),
  unowned: z.number().int().describe('Accounts no node holds now (a takeover in progress)'),
  nodes: z.array(z.object({
    nodeId: z.string(), url: z.string(), live: z.boolean(), heartbeatAgeMs: z.number(), accounts: z.number().int(),
    natsUp: z.boolean().nullable().describe("Whether the node's NATS link was up at its last heartbeat (null: it did not say, e.g. right after its start)"),
    leases: LeaseCounts.nullable().describe("The node's lease changes since its process started, as of its last heartbeat (null: it did not say, e.g. a node of an older build)"),
    calls: CallCounts.nullable().describe("Account calls between nodes, counted on the node since its process started, as of its last heartbeat (null: it did not say)"),
    quoteSessions: z.array(QuoteSessionStatus).nullable().describe("The node's quote sessions (QUOTE_LOGINS_FILE) as of its last heartbeat (null: it did not say, e.g. a node of an older build)"),
  })),
  leases: LeaseCounts.describe("This node's lease changes since it started, now (as tagw_cluster_leases_total and tagw_cluster_takeovers_total on /metrics)"),
  calls: CallCounts.describe("Account calls between nodes, counted on this node since it started, now (as tagw_cluster_calls_total on /metrics)"),
  quoteSessions: z.array(QuoteSessionStatus).describe("This node's quote sessions (QUOTE_LOGINS_FILE; none without it), now (as tagw_cluster_quote_session_* on /metrics)"),
}).nullable().describe('Cluster mode (docs/cluster.md): this node, the nodes PostgreSQL knows of and their accounts; null on a single node');

export async function clusterStatusBody(node: ClusterNode | undefined, leaseMs: number): Promise<z.infer<typeof ClusterStatusBody>> {
  if (!node) return null;
  const [overview, quoteSessions] = await Promise.all([node.overview(), quoteSessionsNow(node)]);
  return clusterStatusOf(node.status(), overview, leaseMs, quoteSessions);
}

/** This node's quote sessions read from its shards now, or as last read (each second) when they take
 *  longer than `boundMs`: a shard stuck or restarting does not hold the status up. */
export async function quoteSessionsNow(node: Pick<ClusterNode, 'quoteSessions' | 'quoteSessionsSeen'>, boundMs = 1_000): Promise<QuoteSessionStatus[]> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<QuoteSessionStatus[]>((resolve) => (timer = setTimeout(() => resolve(node.quoteSessionsSeen()), boundMs)));
  try {
    return await Promise.race([node.quoteSessions(), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The body from this node's figures and PostgreSQL's node rows (pure: unit-tested). */
export function clusterStatusOf(st: ClusterStatus, o: { nodes: readonly NodeRow[]; unowned: number }, leaseMs: number, quoteSessions: QuoteSessionStatus[] = []): NonNullable<z.infer<typeof ClusterStatusBody>> {
  const mine = nodeCounters(st.leases, st.routing);
  return {
    nodeId: st.nodeId, natsUp: st.natsUp, steppedDown: st.steppedDown, ownedHere: st.ownedHere, unowned: o.unowned,
    nodes: o.nodes.map((n) => ({
      nodeId: n.nodeId, url: n.url, live: n.heartbeatAgeMs < leaseMs, heartbeatAgeMs: n.heartbeatAgeMs, accounts: n.accounts, natsUp: n.natsUp,
      leases: n.counters?.leases ?? null, calls: n.counters?.calls ?? null, quoteSessions: n.counters?.quoteSessions ?? null,
    })),
    leases: mine.leases,
    calls: mine.calls,
    quoteSessions,
  };
}
