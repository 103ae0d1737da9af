// A "no owner" announcement makes the account's target run a lease round at once
// (LeaseKeeper.nudge, wired by nudgeOnRelease as ClusterNode does): after a SIGTERM handover the
// survivor takes the accounts without waiting for its next period. Real PostgreSQL and nats-server;
// each node's keeper announces on its own NATS connection through its OwnerCache. What the nudge
// saves is measured in bench/ (`npm run bench -- cluster`, `handover`).
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { PgPool } from '../../src/cluster/pgPool.js';
import { startKeeperNode } from '../helpers/cluster.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { migratedDatabase, sharedPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

let pg: Engine;
let nats: Engine;
const closers: Array<() => Promise<unknown> | unknown> = [];

beforeAll(async () => {
  [pg, nats] = await Promise.all([sharedPostgres(), startNats()]);
}, 60_000);
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await Promise.all([pg?.stop(), nats?.stop()]);
});

const ACCOUNTS = Array.from({ length: 40 }, (_, i) => `acct-${i}`);

async function node(id: string, pool: PgPool, leaseMs: number, nudge: boolean) {
  const n = await startKeeperNode({ natsUrl: nats.url, id, pool, accounts: ACCOUNTS, leaseMs, nudge });
  closers.push(n.close);
  return n;
}

describe('takeover after a handover', () => {
  it('the survivor takes a leaving node\'s accounts on its announcement, with no periodic round of its own', async () => {
    const { pool } = await migratedDatabase(pg);
    closers.push(() => pool.end());
    const a = await node('a', pool, 3_000, true);
    const b = await node('b', pool, 3_000, true);
    a.keeper.start();
    await until(() => a.holds() === ACCOUNTS.length, 'a to take every account');
    // b is never started: it only heartbeats once, then acts on announcements alone.
    await b.keeper.tick();
    // a's next round hands b its share (the announcement nudges b), then SIGTERM hands over the rest.
    await until(() => b.holds() > 0, 'b to take its share on a\'s handover announcement');
    await a.keeper.stop({ handover: true });
    await until(() => b.holds() === ACCOUNTS.length, 'b to take every account on a\'s SIGTERM handover');
  }, 60_000);
});
