// The simulator store on a full disk (src/store/fullDisk.ts, docs/storage.md). A change no request
// waits for (an equity point of the clock) whose commit meets SQLITE_FULL stays queued: readers see
// it, the store is not poisoned, and it is committed once there is room. A change a request waits for
// (an order without a claim, through whenDurable) is committed at once with the rows that waited,
// and its commit failing still poisons the store (the order is answered that nothing happened).
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { createLogger } from '../../src/log.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { StorePoisonedError } from '../../src/store/simFailStop.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';
import { until } from '../helpers/until.js';

const cleanup = useCleanup();

async function open(retryMs: number) {
  const db = new Database(join(tempDir(cleanup, 'tagw-sim-full-'), 'sim.db'));
  cleanup.dbs.push(db);
  SqliteSimStore.configure(db);
  // The journal's inserts fail as a full disk makes them fail, while `full` holds.
  const disk = { full: false };
  db.function('full_now', { deterministic: false }, () => {
    if (disk.full) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    return 0;
  });
  const reports: unknown[] = [];
  const clock = new ManualClock(T0);
  const store = new SqliteSimStore(db, { onError: (err) => reports.push(err), clock, fullDisk: new FullDisk({ log: createLogger('silent'), retryMs }) });
  db.exec('CREATE TEMP TRIGGER full_journal BEFORE INSERT ON sim_journal WHEN full_now() BEGIN SELECT 1; END');
  const sim = new Simulator({ config: testConfig(), store, clock });
  const conn = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: 'full-1', password: 'pw' });
  await conn.connect();
  await conn.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
  const onDisk = () => (db.prepare('SELECT count(*) AS n FROM sim_journal').get() as { n: number }).n;
  // The position's first equity point, then the clock's next minute: one more, which meets the disk.
  sim.advance();
  await until(() => store.pendingCommit() === null, 'the first equity point committed');
  const before = { rows: onDisk(), points: (await conn.equityHistory(0)).length };
  disk.full = true;
  clock.advance(60_000);
  sim.advance();
  await new Promise((r) => setImmediate(r));
  return { db, disk, store, sim, conn, reports, onDisk, before };
}

describe('the simulator store on a full disk', () => {
  it('a change of the clock waits in memory (readers see it, nothing is poisoned) and is written once there is room', async () => {
    const s = await open(20);
    expect(s.store.pendingCommit()).not.toBeNull();
    expect(s.onDisk()).toBe(s.before.rows);
    expect((await s.conn.equityHistory(0)).length).toBe(s.before.points + 1);
    expect(s.reports).toEqual([]);
    s.disk.full = false;
    await until(() => s.onDisk() === s.before.rows + 1, 'the waiting row written by a retry');
    expect(s.store.pendingCommit()).toBeNull();
    expect(s.reports).toEqual([]);
    s.sim.stop();
  });

  it('an order then (the disk has room again) is committed at once, with the rows that waited', async () => {
    const s = await open(1e9); // no retry: the order's commit is what writes them
    s.disk.full = false;
    await s.conn.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    expect(s.onDisk()).toBe(s.before.rows + 2);
    expect(s.reports).toEqual([]);
    s.sim.stop();
  });

  it('an order whose commit meets the full disk fails, and poisons the store as before', async () => {
    const s = await open(1e9);
    await expect(s.conn.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 })).rejects.toThrow('database or disk is full');
    expect(s.reports.map(String)).toEqual(['Error: database or disk is full']);
    s.disk.full = false;
    expect(() => s.store.checkpoint()).toThrow(StorePoisonedError);
    expect(s.onDisk()).toBe(s.before.rows);
    s.sim.stop();
  });
});

describe('ticket numbers on a full disk', () => {
  it('the block of ticket numbers that runs out is followed by one taken before the disk filled: a stop hit then needs no write', async () => {
    const s = await open(1e9);
    s.disk.full = false;
    s.db.exec('CREATE TEMP TRIGGER full_counters BEFORE UPDATE ON sim_counters WHEN full_now() BEGIN SELECT 1; END');
    const server = s.sim.server('Sim-P5-Demo')!;
    const ids = [server.nextId()];
    while (ids.length < 900) ids.push(server.nextId());
    s.disk.full = true;
    // Past the end of the block (1,024 numbers) with the disk full: before, its next block was a
    // write, and its failure, thrown from the market's timer (a stop hit), ended the shard.
    for (let i = 0; i < 600; i++) ids.push(server.nextId());
    expect(new Set(ids).size).toBe(ids.length);
    s.disk.full = false;
    s.sim.stop();
  });
});
