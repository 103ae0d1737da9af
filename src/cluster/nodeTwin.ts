// One process per NODE_ID. A node started again under its id (a restart after a crash, a rolling
// restart) takes its earlier process's leases back at once (leases.ts reclaimLeases), so that
// process must be gone: dead, or frozen (SIGSTOP) and then fenced out. A process that still
// heartbeats under the id is a second live one (a misconfiguration: two machines given one
// NODE_ID), and the new one refuses to start rather than split the id's accounts between them.
import type { Alive } from './liveness.js';
import type { Queryable } from './pgPool.js';

/** Another process runs under this NODE_ID now: the start is refused (exit 2). */
export class NodeIdInUseError extends Error {
  constructor(nodeId: string) {
    super(`NODE_ID ${nodeId} is in use: another gateway process runs under it (its heartbeat in the cluster database is live); give each node its own NODE_ID, or stop the other one first`);
  }
}

/** A newer process took this process's NODE_ID over (this one was frozen or cut off meanwhile): it
 *  holds nothing any more and must stop (exit 2). */
export class SupersededError extends Error {
  constructor(nodeId: string) {
    super(`NODE_ID ${nodeId} was taken over by a newer gateway process (this one was frozen or cut off from the cluster database meanwhile): this process holds no account any more and stops`);
  }
}

interface Beat { at: string; ageMs: number; incarnation: number | null }

async function lastBeat(q: Queryable, nodeId: string): Promise<Beat | undefined> {
  const r = await q.query<{ at: string; age_ms: number; incarnation: string | null }>(
    `SELECT heartbeat_at::text AS at, (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS age_ms, incarnation
     FROM cluster_nodes WHERE node_id = $1`, [nodeId]);
  const row = r.rows[0];
  return row ? { at: row.at, ageMs: row.age_ms, incarnation: row.incarnation === null ? null : Number(row.incarnation) } : undefined;
}

/** Whether a newer process of this NODE_ID wrote the node's row (this one is superseded). */
export async function replacedBy(q: Queryable, nodeId: string, incarnation: number): Promise<boolean> {
  const r = await q.query<{ newer: boolean }>('SELECT incarnation > $2 AS newer FROM cluster_nodes WHERE node_id = $1', [nodeId, incarnation]);
  return r.rows[0]?.newer === true;
}

/** How a start found its NODE_ID free: no earlier process with a live heartbeat; one that nobody
 *  answers for on NATS (`gone`) or that did not answer twice (`silent`), taken over at once; or,
 *  NATS not answering either, no heartbeat within a renewal period and a half (`waited`). */
export type TwinCheck = 'no-live-beat' | 'gone' | 'silent' | 'waited';

/** What a start says when it takes its NODE_ID over from an earlier process whose heartbeat was live. */
export const TWIN_TAKEN_OVER: Record<Exclude<TwinCheck, 'no-live-beat'>, string> = {
  gone: 'NODE_ID taken over at once: nobody answers for it on NATS (its earlier process is gone)',
  silent: 'NODE_ID taken over at once: its earlier process did not answer on NATS twice (frozen or cut off; it is fenced)',
  waited: 'NODE_ID taken over after a renewal period and a half without a heartbeat from its earlier process (NATS did not answer)',
};

/**
 * Before this process writes its node row: when an earlier process's heartbeat is younger than the
 * lease, asks that process over NATS (`ask`, liveness.ts): an answer from another incarnation is a
 * second live process, and the start is refused (NodeIdInUseError); nobody listening (a dead
 * process), or no answer to two questions in a row while NATS answered (a frozen or cut-off one),
 * lets this process take over at once. Only when NATS does not
 * answer either (or without `ask`) does it wait until the earlier process would have heartbeated
 * again (a renewal period, a third of the lease, and half of one to spare, from its last) and refuse
 * the start if it did. One taken over that was only late (a loaded machine) is fenced all the same:
 * its next heartbeat finds the row taken over (SupersededError).
 */
export async function refuseLiveTwin(q: Queryable, nodeId: string, incarnation: number, leaseMs: number, ask?: () => Promise<Alive>): Promise<TwinCheck> {
  const first = await lastBeat(q, nodeId);
  if (!first || first.ageMs >= leaseMs || first.incarnation === incarnation) return 'no-live-beat';
  let alive = ask ? await ask() : 'unknown';
  // One question unanswered may be a live process whose event loop stalled past the bound (a loaded
  // machine): asked once more, as forwarding does (two misses in a row), before it is taken over.
  if (alive === 'silent' && ask) alive = await ask();
  if (alive === 'gone' || alive === 'silent') return alive;
  if (alive !== 'unknown') {
    if (alive.incarnation !== incarnation) throw new NodeIdInUseError(nodeId);
    return 'no-live-beat';
  }
  const periodMs = Math.max(1, Math.floor(leaseMs / 3));
  await new Promise((r) => setTimeout(r, Math.max(0, periodMs * 1.5 - first.ageMs)));
  const again = await lastBeat(q, nodeId);
  if (again && again.at !== first.at && again.incarnation !== incarnation) throw new NodeIdInUseError(nodeId);
  return 'waited';
}
