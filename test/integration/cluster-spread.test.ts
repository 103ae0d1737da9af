// Accounts spread evenly over the nodes (issue 20), with real lease keepers on PostgreSQL and
// nats-server, on their timers, nudged by one another's release announcements as ClusterNode wires
// them: 12 accounts over 3 nodes are 4 each (rendezvous alone gave [2,5,5] or [6,2,4]); a node
// that leaves gives away only its own accounts, one that joins takes only its share, and a settled
// spread stays put.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseRows } from '../../src/cluster/leases.js';
import type { PgPool } from '../../src/cluster/pgPool.js';
import { startKeeperNode, type KeeperNode } from '../helpers/cluster.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { migratedDatabase, sharedPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

let pg: Engine;
let nats: Engine;
let pool: PgPool;
const nodes = new Map<string, KeeperNode>();

beforeAll(async () => {
  [pg, nats] = await Promise.all([sharedPostgres(), startNats()]);
  pool = (await migratedDatabase(pg)).pool;
}, 60_000);
afterAll(async () => {
  for (const n of nodes.values()) await n.close();
  await pool?.end();
  await Promise.all([pg?.stop(), nats?.stop()]);
});

const ACCOUNTS = Array.from({ length: 12 }, (_, i) => `acct-${i}`);
const LEASE_MS = 1_500; // rounds every 500 ms

async function start(id: string): Promise<KeeperNode> {
  const n = await startKeeperNode({ natsUrl: nats.url, id, pool, accounts: ACCOUNTS, leaseMs: LEASE_MS, nudge: true });
  nodes.set(id, n);
  n.keeper.start();
  return n;
}

/** Who holds each account, from PostgreSQL (live leases only). */
async function owners(): Promise<Map<string, string>> {
  return new Map((await leaseRows(pool)).filter((r) => r.live && r.owner).map((r) => [r.accountId, r.owner!]));
}

const spread = (o: Map<string, string>, ids: string[]) => ids.map((id) => [...o.values()].filter((x) => x === id).length);

/** Waits until every account is held and the nodes hold `want` each, in PostgreSQL and in their keepers. */
async function settled(ids: string[], want: number[]): Promise<Map<string, string>> {
  let o = new Map<string, string>();
  await until(async () => {
    o = await owners();
    return o.size === ACCOUNTS.length && spread(o, ids).join() === want.join() && ids.every((id, i) => nodes.get(id)!.holds() === want[i]);
  }, `a spread of ${want} (last ${[...ids].map((id) => nodes.get(id)?.holds())})`, 20_000);
  return o;
}

describe('accounts spread evenly', () => {
  it('12 accounts over 3 nodes: 4 each; a leaving node gives away only its 4, a joining one takes only 4, and the spread stays put', async () => {
    await Promise.all(['a', 'b', 'c'].map(start));
    const first = await settled(['a', 'b', 'c'], [4, 4, 4]);
    const released = () => [...nodes.values()].reduce((s, n) => s + n.keeper.stats.released, 0);
    expect(released()).toBe(0); // the cold start split at once

    // Stable: three more rounds of every node move nothing.
    const before = released();
    for (let i = 0; i < 3; i++) await Promise.all([...nodes.values()].map((n) => n.keeper.tick()));
    expect(await owners()).toEqual(first);
    expect(released()).toBe(before);

    // c leaves (SIGTERM): a and b take its 4, 2 each; nothing of theirs moves.
    await nodes.get('c')!.keeper.stop({ handover: true });
    await nodes.get('c')!.close();
    nodes.delete('c');
    const two = await settled(['a', 'b'], [6, 6]);
    for (const [acct, o] of first) if (o !== 'c') expect(two.get(acct), acct).toBe(o);

    // c comes back: it takes 4, 2 from each, and nothing else moves.
    await start('c');
    const three = await settled(['a', 'b', 'c'], [4, 4, 4]);
    const moved = ACCOUNTS.filter((acct) => three.get(acct) !== two.get(acct));
    expect(moved).toHaveLength(4);
    for (const acct of moved) expect(three.get(acct)).toBe('c');
  }, 60_000);
});
