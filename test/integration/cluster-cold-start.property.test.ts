// Cold start of a cluster (LeaseKeeper's settle period): nodes that start within the settle window
// each take only their share at once (an even split), with no handover; without the settle period the
// first node takes every account and hands most over. Real PostgreSQL, real timers.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leaseRows } from '../../src/cluster/leases.js';
import { LeaseKeeper, monotonicClock } from '../../src/cluster/leaseKeeper.js';
import { targetOwners } from '../../src/cluster/rendezvous.js';
import { createLogger } from '../../src/log.js';
import type { Engine } from '../helpers/engines.js';
import { migratedDatabase, sharedPostgres } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

let pg: Engine;
beforeAll(async () => {
  pg = await sharedPostgres();
}, 60_000);
afterAll(async () => {
  await pg?.stop();
});

const ACCOUNTS = Array.from({ length: 90 }, (_, i) => `acct-${i}`);
const NODES = ['node-a', 'node-b', 'node-c'];
const LEASE_MS = 3_000; // rounds every second: a handover would need one to happen
const SETTLE_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Starts three keepers at the given offsets (ms after the first; 'first holds all': once the first
 *  holds every account), waits until every account is held and one more round of each has run, and
 *  reports what each holds and released. */
async function coldStart(offsets: Array<number | 'first holds all'>, settleMs: number) {
  const { pool } = await migratedDatabase(pg);
  const keepers = NODES.map((nodeId) => new LeaseKeeper({
    db: pool, nodeId, leaseMs: LEASE_MS, clock: monotonicClock, accounts: () => ACCOUNTS, log: createLogger('silent'), settleMs,
  }));
  try {
    await Promise.all(keepers.map(async (k, i) => {
      const at = offsets[i]!;
      if (at === 'first holds all') await until(() => keepers[0]!.held().length === ACCOUNTS.length, 'the first node to hold every account', 20_000);
      else await sleep(at);
      k.start();
    }));
    await until(() => keepers.reduce((n, k) => n + k.held().length, 0) === ACCOUNTS.length, 'every account held', 20_000);
    // One more round each: a node that holds another's share would hand it over now.
    await Promise.all(keepers.map((k) => k.tick()));
    await until(() => keepers.reduce((n, k) => n + k.held().length, 0) === ACCOUNTS.length, 'every account held after the next round', 20_000);
    const rows = await leaseRows(pool);
    return {
      held: new Map(NODES.map((n, i) => [n, new Set(keepers[i]!.held().map((l) => l.accountId))])),
      released: keepers.reduce((n, k) => n + k.stats.released, 0),
      maxEpoch: Math.max(...rows.map((r) => r.epoch)),
    };
  } finally {
    await Promise.all(keepers.map((k) => k.stop({ handover: false })));
    await pool.end();
  }
}

describe('cold start', () => {
  it('property: three keepers starting within the settle window split the accounts evenly at once, with no handover', async () => {
    const split = targetOwners(NODES, ACCOUNTS, new Map());
    const target = new Map(NODES.map((n) => [n, new Set(ACCOUNTS.filter((a) => split.get(a) === n))]));
    await fc.assert(fc.asyncProperty(
      // The later two start up to half the settle period after the first (the other half covers
      // their heartbeat reaching PostgreSQL on a loaded machine).
      fc.tuple(fc.integer({ min: 0, max: SETTLE_MS / 2 }), fc.integer({ min: 0, max: SETTLE_MS / 2 })),
      async ([b, c]) => {
        const r = await coldStart([0, b, c], SETTLE_MS);
        for (const n of NODES) expect(r.held.get(n), n).toEqual(target.get(n));
        expect(r.released).toBe(0);
        expect(r.maxEpoch).toBe(1); // every lease acquired once: nobody took an account over
      },
    ), { numRuns: 4 });
    // The split is even: 30 each of 90 accounts.
    for (const n of NODES) expect(target.get(n)!.size).toBe(30);
  }, 120_000);

  it('without the settle period the first node takes everything and hands most of it over (what the settle period prevents)', async () => {
    // The others start once the first holds everything: a fixed delay (250 ms) could pass on a loaded
    // machine before the first node's first round, which would then see all three and split evenly.
    const r = await coldStart([0, 'first holds all', 'first holds all'], 0);
    expect(r.released).toBeGreaterThan(0);
    expect(r.maxEpoch).toBeGreaterThan(1);
  }, 60_000);
});
