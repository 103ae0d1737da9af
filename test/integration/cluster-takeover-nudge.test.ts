// A "no owner" announcement makes the account's target run a lease round at once
// (LeaseKeeper.nudge, wired by nudgeOnRelease as ClusterNode does): after a SIGTERM handover the
// survivor takes the accounts without waiting for its next period. Real PostgreSQL and nats-server;
// each node's keeper announces on its own NATS connection through its OwnerCache.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseKeeper, monotonicClock, nudgeOnRelease } from '../../src/cluster/leaseKeeper.js';
import { NatsLink } from '../../src/cluster/natsLink.js';
import { OwnerCache } from '../../src/cluster/owners.js';
import type { PgPool } from '../../src/cluster/pgPool.js';
import { createLogger } from '../../src/log.js';
import { startNats, startPostgres, type Engine } from '../helpers/engines.js';
import { migratedDatabase } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

const log = createLogger('silent');
let pg: Engine;
let nats: Engine;
const closers: Array<() => Promise<unknown> | unknown> = [];

beforeAll(async () => {
  [pg, nats] = await Promise.all([startPostgres(), startNats()]);
}, 60_000);
afterAll(async () => {
  for (const c of closers.reverse()) await c();
  await Promise.all([pg?.stop(), nats?.stop()]);
});

const ACCOUNTS = Array.from({ length: 40 }, (_, i) => `acct-${i}`);

async function node(id: string, pool: PgPool, leaseMs: number, nudge: boolean) {
  const link = await NatsLink.connect({ url: nats.url, name: id, log });
  const owners = new OwnerCache({ link, log, lookup: async () => ({ owner: null, epoch: 0 }) });
  const keeper: LeaseKeeper = new LeaseKeeper({
    db: pool, nodeId: id, leaseMs, clock: monotonicClock, accounts: () => ACCOUNTS, log,
    events: {
      acquired: (ls) => ls.forEach((l) => owners.announce(l.accountId, { owner: id, epoch: l.epoch })),
      released: (ls) => ls.forEach((l) => owners.announce(l.accountId, { owner: null, epoch: l.epoch })),
    },
  });
  if (nudge) nudgeOnRelease(owners, keeper);
  await link.nc.flush();
  closers.push(async () => {
    await keeper.stop({ handover: false });
    owners.close();
    await link.close();
  });
  return { keeper, holds: () => keeper.held().length };
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

  it('measures: SIGTERM handover to the survivor holding everything, with and without the nudge (printed)', async () => {
    const leaseMs = 3_000; // rounds every second
    const takeover = async (nudge: boolean): Promise<number> => {
      const { pool } = await migratedDatabase(pg);
      closers.push(() => pool.end());
      const a = await node('a', pool, leaseMs, nudge);
      a.keeper.start();
      await until(() => a.holds() === ACCOUNTS.length, 'a to take every account');
      const b = await node('b', pool, leaseMs, nudge);
      b.keeper.start();
      await until(async () => b.holds() > 0 && b.holds() + a.holds() === ACCOUNTS.length, 'the split');
      const t0 = performance.now();
      await a.keeper.stop({ handover: true });
      await until(() => b.holds() === ACCOUNTS.length, 'b to hold every account');
      return performance.now() - t0;
    };
    const runs = 3;
    const without: number[] = [];
    const withNudge: number[] = [];
    for (let i = 0; i < runs; i++) {
      without.push(await takeover(false));
      withNudge.push(await takeover(true));
    }
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    console.log(JSON.stringify({ takeoverAfterSigtermMs: { leaseMs, without: without.map(Math.round), withNudge: withNudge.map(Math.round), meanRatio: +(mean(withNudge) / mean(without)).toFixed(3) } }));
    expect(withNudge).toHaveLength(runs);
  }, 120_000);
});
