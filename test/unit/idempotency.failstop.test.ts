// Fail-stop of the simulator's store (src/store/simFailStop.ts). A failed commit of an idempotent
// order's claim and booking used to leave the booking in the simulator's memory: the account's next
// checkpoint wrote its position, and after a restart the record was gone, so the retry booked the
// order a second time (a lone order's failed commit, then 32 more orders: 34 positions for 33 ids).
// Now the store refuses every write after a failed commit, and a restart starts from the disk.
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ApiError } from '../../src/errors.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { StorePoisonedError } from '../../src/store/simFailStop.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';
import { bootTradingHost, openTickets, phaseOf, sendOrder, tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();
const turn = () => new Promise((r) => setImmediate(r));

describe('a failed commit of the simulator store', () => {
  it('a lone order fails, 32 more follow, a restart: every id is booked once, the failed one by its retry', async () => {
    const dir = tempDir(cleanup, 'tagw-failstop-');
    const { host, db } = await bootTradingHost(cleanup, dir);
    const opened = (await openTickets(host)).length;
    db.exec("CREATE TEMP TRIGGER fail_journal BEFORE INSERT ON sim_journal BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END");
    const failed = await sendOrder(host, 'f-0').then(() => null, (e: unknown) => e);
    expect((failed as ApiError).code).toBe('TERMINAL_ERROR');
    db.exec('DROP TRIGGER fail_journal');
    const ids = Array.from({ length: 32 }, (_, i) => `o-${i}`);
    const answered = new Map<string, TradeReply>();
    await Promise.all(ids.map((id) => sendOrder(host, id).then((r) => void answered.set(id, r), () => undefined)));
    // A checkpoint pass has run by now (32 records are a pass's worth).
    for (let i = 0; i < 3; i++) await turn();
    const reader = new Database(join(dir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    cleanup.dbs.push(reader);
    const onDisk = ['f-0', ...ids].filter((id) => phaseOf(reader, id) !== undefined);
    host.stop();

    // A restart from the disk: an answered order replays its answer, any other is booked by its retry.
    const again = await bootTradingHost(cleanup, dir);
    for (const id of ['f-0', ...ids]) {
      const r = await sendOrder(again.host, id);
      expect(r.status).toBe(200);
      if (answered.has(id)) expect(r).toEqual({ ...answered.get(id), replay: true });
    }
    // Each id at the broker once, the failed one included (it was 34 positions for 33 ids).
    expect((await openTickets(again.host)).length - opened).toBe(33);
    // And once more from the disk, after its checkpoints: still 33.
    again.host.stop();
    const third = await bootTradingHost(cleanup, dir);
    expect((await openTickets(third.host)).length - opened).toBe(33);
    // Fail-stop: after the failed commit the store wrote nothing more from its memory, so the 32
    // were refused (not answered) and nothing of them reached the disk until the restart.
    expect([answered.size, onDisk]).toEqual([0, []]);
  });

  it('the store refuses every write once poisoned, the disk working again or not, and reports the failure once', async () => {
    const dir = tempDir(cleanup, 'tagw-failstop-store-');
    const db = new Database(join(dir, 'sim.db'));
    cleanup.dbs.push(db);
    SqliteSimStore.configure(db);
    const reports: unknown[] = [];
    const store = new SqliteSimStore(db, { checkpointMs: 0, onError: (err) => reports.push(err) });
    const sim = new Simulator({ config: testConfig(), store, clock: new ManualClock(T0) });
    const conn = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: 'fs-1', password: 'pw' });
    await conn.connect();
    const rows = (t: string) => (db.prepare(`SELECT count(*) AS n FROM ${t}`).get() as { n: number }).n;
    const before = { journal: rows('sim_journal'), state: db.prepare('SELECT data FROM sim_state ORDER BY 1').all() };
    db.exec("CREATE TEMP TRIGGER fail_journal BEFORE INSERT ON sim_journal BEGIN SELECT RAISE(ABORT, 'disk I/O error (test)'); END");
    await expect(conn.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 }, { requestId: 'r-1' })).rejects.toThrow('disk I/O error (test)');
    db.exec('DROP TRIGGER fail_journal');
    // The booking is in memory; nothing of it, or of anything after it, may reach the disk.
    expect((await conn.openedOrders()).positions.length).toBe(1);
    await expect(conn.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 }, { requestId: 'r-2' })).rejects.toThrow(StorePoisonedError);
    expect(() => store.checkpoint()).toThrow(StorePoisonedError);
    expect(() => store.allocateIds('Sim-P5-Demo', 1)).toThrow(StorePoisonedError);
    store.flush(); // a stopping host's flush writes nothing and does not throw
    for (let i = 0; i < 3; i++) await turn();
    expect({ journal: rows('sim_journal'), state: db.prepare('SELECT data FROM sim_state ORDER BY 1').all() }).toEqual(before);
    expect(reports.map((e) => (e as Error).message)).toEqual(['disk I/O error (test)']);
    sim.stop();
  });
});
