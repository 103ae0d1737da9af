// Account leases and node heartbeats in PostgreSQL: the truth about who owns an account. Lease
// times are PostgreSQL's clock (now()), the one clock all nodes share. Each function is one
// statement: a lease is acquired only when free or expired and then carries a new epoch; renewal
// keeps the epoch; every write for an account is fenced by fenceSql().
import { withTransaction, type PgPool, type Queryable } from './pgPool.js';
import { SupersededError } from './nodeTwin.js';
import { countersOf, type NodeCounters } from './nodeCounters.js';

export interface Lease {
  accountId: string;
  /** Fencing epoch: +1 at every acquisition. A write carrying another epoch is refused. */
  epoch: number;
}

export interface LeaseRow {
  accountId: string;
  /** null: released, or never taken. */
  owner: string | null;
  epoch: number;
  /** false once expires_at has passed on PostgreSQL's clock. */
  live: boolean;
}

const MS = `* interval '1 millisecond'`;

/**
 * A sub-select that yields one row iff `owner` holds the account's lease with `epoch` and it has not
 * expired. FOR SHARE locks the lease row until the writing transaction ends, so a takeover (an UPDATE
 * of that row) waits for the write, and a write that starts after the takeover committed re-reads
 * the row and finds it no longer ours: after a takeover, no write of the old owner can land.
 * Placeholders are the caller's parameter numbers.
 */
export function fenceSql(p: { account: number; owner: number; epoch: number }): string {
  return `SELECT 1 FROM account_leases WHERE account_id = $${p.account} AND owner = $${p.owner} AND epoch = $${p.epoch} AND expires_at > now() FOR SHARE`;
}

function unique(ids: readonly string[]): string[] {
  return [...new Set(ids)];
}

/** Acquires each account that is free or expired (new epoch, expiring in leaseMs); returns those it got.
 *  With `incarnation`, only while the node's row names that process (FOR SHARE: a newer process of
 *  the same NODE_ID taking the row over waits for this statement, or this one finds it taken). */
export async function acquireLeases(q: Queryable, nodeId: string, accountIds: readonly string[], leaseMs: number, incarnation?: number): Promise<Lease[]> {
  return (await acquireLeasesTelling(q, nodeId, accountIds, leaseMs, incarnation)).map(({ accountId, epoch }) => ({ accountId, epoch }));
}

/** A lease acquired, and how the one before it ended. */
export interface Acquired extends Lease {
  /** Its holder stopped renewing it and it ran out (a node that died or could not reach PostgreSQL):
   *  a takeover after a crash. false: released by its holder (a handover: SIGTERM, a rebalance, a
   *  node stepping down) or never held. */
  expired: boolean;
}

/** acquireLeases, each telling how the lease before it ended. Read from the statement's snapshot,
 *  taken before its row locks: a lease live there that the statement still acquired was released
 *  meanwhile (its expiry is judged at the same now(), which does not move within the statement). */
export async function acquireLeasesTelling(q: Queryable, nodeId: string, accountIds: readonly string[], leaseMs: number, incarnation?: number): Promise<Acquired[]> {
  if (accountIds.length === 0) return [];
  const r = await q.query<{ account_id: string; epoch: number; expired: boolean }>(
    `WITH before AS (SELECT account_id, (owner IS NOT NULL AND expires_at <= now()) AS expired FROM account_leases WHERE account_id = ANY($2::text[]))
     INSERT INTO account_leases (account_id, owner, epoch, expires_at)
       SELECT id, $1::text, 1, now() + $3::int ${MS} FROM unnest($2::text[]) AS id
       WHERE $4::bigint IS NULL OR EXISTS (SELECT 1 FROM cluster_nodes WHERE node_id = $1 AND incarnation = $4 FOR SHARE)
     ON CONFLICT (account_id) DO UPDATE SET owner = excluded.owner, epoch = account_leases.epoch + 1, expires_at = excluded.expires_at
       WHERE account_leases.owner IS NULL OR account_leases.expires_at <= now()
     RETURNING account_id, epoch, COALESCE((SELECT b.expired FROM before b WHERE b.account_id = account_leases.account_id), false) AS expired`,
    [nodeId, unique(accountIds), leaseMs, incarnation ?? null],
  );
  return r.rows.map((row) => ({ accountId: row.account_id, epoch: row.epoch, expired: row.expired }));
}

/** Does another node hold a live lease? (No: the cluster is starting cold, nobody serves yet.) */
export async function othersHoldLeases(q: Queryable, nodeId: string): Promise<boolean> {
  const r = await q.query<{ any: boolean }>(
    'SELECT EXISTS (SELECT 1 FROM account_leases WHERE owner IS NOT NULL AND owner <> $1 AND expires_at > now()) AS any',
    [nodeId],
  );
  return r.rows[0]?.any ?? false;
}

/** Extends every lease of `held` still ours (same epoch, not expired) by leaseMs, in one statement;
 *  returns the ones renewed (a missing one was lost: expired and maybe taken). */
export async function renewLeases(q: Queryable, nodeId: string, held: readonly Lease[], leaseMs: number): Promise<Lease[]> {
  if (held.length === 0) return [];
  const r = await q.query<{ account_id: string; epoch: number }>(
    `UPDATE account_leases l SET expires_at = now() + $2::int ${MS}
     FROM unnest($3::text[], $4::bigint[]) AS h(account_id, epoch)
     WHERE l.account_id = h.account_id AND l.epoch = h.epoch AND l.owner = $1 AND l.expires_at > now()
     RETURNING l.account_id, l.epoch`,
    [nodeId, leaseMs, held.map((l) => l.accountId), held.map((l) => l.epoch)],
  );
  return r.rows.map((row) => ({ accountId: row.account_id, epoch: row.epoch }));
}

/** Hands the leases over: free at once for the next owner (whose acquisition bumps the epoch).
 *  Returns the accounts released (those still ours). */
export async function releaseLeases(q: Queryable, nodeId: string, held: readonly Lease[]): Promise<string[]> {
  if (held.length === 0) return [];
  const r = await q.query<{ account_id: string }>(
    `UPDATE account_leases l SET owner = NULL, expires_at = now()
     FROM unnest($2::text[], $3::bigint[]) AS h(account_id, epoch)
     WHERE l.account_id = h.account_id AND l.epoch = h.epoch AND l.owner = $1
     RETURNING l.account_id`,
    [nodeId, held.map((l) => l.accountId), held.map((l) => l.epoch)],
  );
  return r.rows.map((row) => row.account_id);
}

/** The lease rows of these accounts (all of them when omitted): who owns what, for routers and status. */
export async function leaseRows(q: Queryable, accountIds?: readonly string[]): Promise<LeaseRow[]> {
  const r = await q.query<{ account_id: string; owner: string | null; epoch: number; live: boolean }>(
    `SELECT account_id, owner, epoch, (owner IS NOT NULL AND expires_at > now()) AS live FROM account_leases
     WHERE $1::text[] IS NULL OR account_id = ANY($1::text[]) ORDER BY account_id`,
    [accountIds ? [...accountIds] : null],
  );
  return r.rows.map((row) => ({ accountId: row.account_id, owner: row.owner, epoch: row.epoch, live: row.live }));
}

/** The account's live owner (null while none holds an unexpired lease) and the last epoch: the
 *  lookup behind the owner cache of every node (owners.ts OwnerInfo). Epoch 0: never leased. */
export async function leaseOwner(q: Queryable, accountId: string): Promise<{ owner: string | null; epoch: number }> {
  const [row] = await leaseRows(q, [accountId]);
  return row ? { owner: row.live ? row.owner : null, epoch: row.epoch } : { owner: null, epoch: 0 };
}

/** A new incarnation number for a node's start (higher than every one before, cluster-wide). */
export async function newIncarnation(q: Queryable): Promise<number> {
  const r = await q.query<{ n: number }>("SELECT nextval('cluster_incarnations') AS n");
  return r.rows[0]!.n;
}

/** The node row's update by a process (its incarnation, placeholder `$inc`; its NATS link, `$nats`, and its counters, `$counters`,
 *  else NULL), refused when a newer process of the same NODE_ID wrote it (incarnations only grow).
 *  $1 node, $2 url. */
const nodeUpsert = (inc: number, nats?: number, counters?: number) => `INSERT INTO cluster_nodes (node_id, url, heartbeat_at, incarnation, nats_up, counters)
       VALUES ($1, $2, now(), $${inc}::bigint, ${nats === undefined ? 'NULL' : `$${nats}::boolean`}, ${counters === undefined ? 'NULL' : `$${counters}::jsonb`})
       ON CONFLICT (node_id) DO UPDATE SET url = excluded.url, heartbeat_at = excluded.heartbeat_at, incarnation = excluded.incarnation, nats_up = excluded.nats_up, counters = excluded.counters
       WHERE excluded.incarnation IS NULL OR cluster_nodes.incarnation IS NULL OR cluster_nodes.incarnation <= excluded.incarnation
       RETURNING node_id, nats_up`;

/** A node alive within the heartbeat's bound, and whether its NATS link was up at its last
 *  heartbeat (null: it did not say). */
export interface LiveNode { nodeId: string; natsUp: boolean | null }

/** Records that the node is alive (where it serves, its incarnation, whether its NATS link is up) and
 *  returns the nodes alive within `withinMs` on PostgreSQL's clock, this one included: one round
 *  trip. `counters`: the node's figures since its start, for every node's status (none: NULL).
 *  Throws SupersededError when a newer process runs under this NODE_ID (its row is not this one's
 *  to write). */
export async function heartbeat(q: Queryable, nodeId: string, url: string, withinMs: number, incarnation?: number, natsUp?: boolean, counters?: NodeCounters): Promise<LiveNode[]> {
  const r = await q.query<{ node_id: string; mine: boolean; nats_up: boolean | null }>(
    `WITH me AS (${nodeUpsert(4, 5, 6)})
     SELECT node_id, true AS mine, nats_up FROM me
     UNION ALL SELECT node_id, false, nats_up FROM cluster_nodes WHERE heartbeat_at > now() - $3::int ${MS} AND node_id <> $1
     ORDER BY node_id`,
    [nodeId, url, withinMs, incarnation ?? null, natsUp ?? null, counters === undefined ? null : JSON.stringify(counters)],
  );
  if (!r.rows.some((row) => row.mine)) throw new SupersededError(nodeId);
  return r.rows.map((row) => ({ nodeId: row.node_id, natsUp: row.nats_up }));
}

/**
 * A process starting under its NODE_ID takes over from the earlier ones: the node's row names this
 * incarnation (their heartbeats and acquisitions no longer land), then every live lease held under
 * the id is this process's at a new epoch, so their renewals and fenced writes (same owner, the old
 * epoch) are refused from the commit on. Two statements in one transaction: an acquisition of an
 * earlier process holds the row FOR SHARE, so it either committed before (and its lease is taken
 * back here) or finds the row taken over. Returns the leases taken back.
 */
export async function reclaimLeases(pool: PgPool, nodeId: string, url: string, incarnation: number, leaseMs: number): Promise<Lease[]> {
  return withTransaction(pool, async (c) => {
    const me = await c.query(nodeUpsert(3), [nodeId, url, incarnation]);
    if (me.rowCount === 0) throw new SupersededError(nodeId);
    const r = await c.query<{ account_id: string; epoch: number }>(
      `UPDATE account_leases SET epoch = epoch + 1, expires_at = now() + $2::int ${MS}
       WHERE owner = $1 AND expires_at > now() RETURNING account_id, epoch`,
      [nodeId, leaseMs],
    );
    return r.rows.map((row) => ({ accountId: row.account_id, epoch: row.epoch }));
  });
}

export interface NodeRow {
  nodeId: string;
  url: string;
  /** Since its last heartbeat, on PostgreSQL's clock. */
  heartbeatAgeMs: number;
  /** Accounts it holds an unexpired lease on. */
  accounts: number;
  /** Its process's start (newIncarnation), as its last heartbeat wrote it. */
  incarnation?: number;
  /** Whether its NATS link was up at its last heartbeat (null: it did not say). */
  natsUp: boolean | null;
  /** Its counters as of its last heartbeat (null: it did not say, or not in a shape this build reads). */
  counters: NodeCounters | null;
}

/** Every node in the table with its live lease count, and the accounts nobody holds (a takeover in
 *  progress, or no node alive): what `status` and /metrics show about the cluster. */
export async function clusterOverview(q: Queryable): Promise<{ nodes: NodeRow[]; unowned: number }> {
  const nodes = await q.query<{ node_id: string; url: string; age_ms: number; accounts: number; incarnation: number | null; nats_up: boolean | null; counters: unknown }>(
    `SELECT n.node_id, n.url, n.incarnation, n.nats_up, n.counters, (extract(epoch FROM now() - n.heartbeat_at) * 1000)::float8 AS age_ms,
       (SELECT count(*)::int FROM account_leases l WHERE l.owner = n.node_id AND l.expires_at > now()) AS accounts
     FROM cluster_nodes n ORDER BY n.node_id`);
  // A deleted seat's lease row stays, released (fencing keeps its epoch): it is no account waiting
  // for an owner, or the count (and tagw_cluster_accounts_unowned's alert) would stay above 0.
  const unowned = await q.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM account_leases l WHERE (l.owner IS NULL OR l.expires_at <= now())
       AND EXISTS (SELECT 1 FROM seats s WHERE s.id = l.account_id AND s.removed_at IS NULL)`);
  return {
    nodes: nodes.rows.map((r) => ({
      nodeId: r.node_id, url: r.url, heartbeatAgeMs: Math.max(0, Math.round(r.age_ms)), accounts: r.accounts, natsUp: r.nats_up, counters: countersOf(r.counters), ...(r.incarnation === null ? {} : { incarnation: r.incarnation }),
    })),
    unowned: unowned.rows[0]!.n,
  };
}

/** The node leaves: no longer a target for anyone's rendezvous. With `incarnation`, only its own
 *  row (not one a newer process of the same NODE_ID wrote). */
export async function removeNode(q: Queryable, nodeId: string, incarnation?: number): Promise<void> {
  await q.query('DELETE FROM cluster_nodes WHERE node_id = $1 AND ($2::bigint IS NULL OR incarnation = $2)', [nodeId, incarnation ?? null]);
}
