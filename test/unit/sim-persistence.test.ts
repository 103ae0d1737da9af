// A restart loses nothing: accounts, positions, pending orders, deals, request ids survive
// a new Simulator on the same SQLite file, with or without a checkpoint written.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { RequestLookup } from '../../src/market/orders.js';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { migrateSimStore, SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function open(file: string, checkpointMs: number) {
  const db = new Database(file);
  SqliteSimStore.configure(db);
  return { db, store: new SqliteSimStore(db, { checkpointMs }) };
}

describe.each([
  ['journal replay (no checkpoint since login)', 1e12],
  ['checkpointed state', 0],
])('SQLite persistence: %s', (_name, checkpointMs) => {
  // P4 re-tickets a partial close's rest: the new ticket and both closed records come back too.
  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: restores everything after a restart', async (server) => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-'));
    dirs.push(dir);
    const file = join(dir, 'sim.db');
    const clock = new ManualClock(T0);
    const a = open(file, checkpointMs);
    const sim = new Simulator({ config: testConfig(), store: a.store, clock });
    const c = new SimBrokerConnection(sim, { server, login: '3001', password: 'pw' });
    await c.connect();
    const q = (await c.quote('EURUSD'))!;
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.3, magic: 5 }, { requestId: 'r1' });
    const pend = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: q.ask - 0.003 }, { requestId: 'r2' });
    clock.advance(30_000);
    if (!buy.ok) throw new Error(buy.message);
    await c.orderClose({ ticket: buy.order.ticket, lots: 0.1 }, { requestId: 'r3' });
    const before = { sum: await c.accountSummary(), open: await c.openedOrders(), deals: await c.historyDeals(0, T0 + 1e9), orders: await c.historyOrders(0, T0 + 1e9) };
    expect(before.open.positions[0]!.volume).toBeCloseTo(0.2, 9);
    a.db.close(); // a crash after the last reply: only what was committed remains

    const b = open(file, checkpointMs);
    const sim2 = new Simulator({ config: testConfig(), store: b.store, clock });
    const c2 = new SimBrokerConnection(sim2, { server, login: '3001', password: 'pw' });
    await c2.connect();
    expect(await c2.accountSummary()).toEqual(before.sum);
    expect(await c2.openedOrders()).toEqual(before.open);
    expect(await c2.historyDeals(0, T0 + 1e9)).toEqual(before.deals);
    expect(await c2.historyOrders(0, T0 + 1e9)).toEqual(before.orders);
    // Request ids survive: a resend replays, it does not trade again.
    expect(await c2.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.3, magic: 5 }, { requestId: 'r1' })).toEqual(buy);
    expect(await c2.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: 1 }, { requestId: 'r2' })).toEqual(pend);
    expect((await c2.openedOrders()).positions).toHaveLength(1);
    // The wrong password is still refused, and new tickets do not collide with old ones.
    await expect(new SimBrokerConnection(sim2, { server, login: '3001', password: 'x' }).connect()).rejects.toThrow(/invalid password/);
    const next = await c2.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.1 });
    if (!next.ok) throw new Error(next.message);
    expect(before.deals.map((d) => d.ticket)).not.toContain(next.deals[0]!.ticket);
    b.db.close();
  });
});

describe('checkpoints', () => {
  it('are written a turn after the journal commit an order waits for, never ahead of the journal', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-'));
    dirs.push(dir);
    const a = open(join(dir, 'sim.db'), 0);
    const sim = new Simulator({ config: testConfig(), store: a.store, clock: new ManualClock(T0) });
    const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: '3002', password: 'pw' });
    await c.connect();
    const checkpointSeq = () => {
      const row = a.db.prepare("SELECT data FROM sim_state WHERE login = '3002' AND kind = 'A'").get() as { data: string } | undefined;
      return row ? (JSON.parse(row.data) as { seq: number }).seq : -1;
    };
    const journalSeq = () => (a.db.prepare("SELECT max(seq) AS s FROM sim_journal WHERE login = '3002'").get() as { s: number | null }).s ?? -1;
    await new Promise((r) => setImmediate(r));
    const before = checkpointSeq();
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    expect(buy.ok).toBe(true);
    // The reply came after the journal commit; the checkpoint has not been written yet.
    expect(journalSeq()).toBeGreaterThan(before);
    expect(checkpointSeq()).toBe(before);
    await new Promise((r) => setImmediate(r));
    expect(checkpointSeq()).toBe(journalSeq());
    a.db.close();
  });
});

describe('migrateSimStore', () => {
  it('is idempotent and only creates sim_ tables', () => {
    const db = new Database(':memory:');
    migrateSimStore(db);
    migrateSimStore(db);
    const names = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((r) => r.name);
    expect(names.length).toBeGreaterThan(0);
    for (const n of names) expect(n.startsWith('sim_')).toBe(true);
  });
});

describe('request ids', () => {
  // The store keeps where a request's journal row is, not its outcome (memory, GC); the outcome is
  // read back from the row, committing first when the row is still queued in this turn.
  it('answer a repeat from the journal, also while its row is queued, and keep no outcome object in memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-'));
    dirs.push(dir);
    const a = open(join(dir, 'sim.db'), 1e12);
    const sim = new Simulator({ config: testConfig(), store: a.store, clock: new ManualClock(T0) });
    const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login: '3002', password: 'pw' });
    await c.connect();
    const req = { symbol: 'EURUSD', type: 'Buy' as const, volume: 0.1 };
    // Both at once: the connection runs them one after the other, the second replays the first.
    const [first, again] = await Promise.all([c.orderSend(req, { requestId: 'same' }), c.orderSend(req, { requestId: 'same' })]);
    expect(first.ok).toBe(true);
    expect(again).toEqual(first);
    expect((await c.openedOrders()).positions).toHaveLength(1);
    const lookup = a.store.request('Sim-P5-Demo', '3002', 'same');
    expect(lookup?.result).toEqual(first);
    expect(lookup?.result).not.toBe(first); // decoded from the journal, not held since the trade
    expect(a.store.request('Sim-P5-Demo', '3002', 'other')).toBeNull();
    // A row applied in this turn and not yet committed is found too.
    const queued = { requestId: 'queued', timeMsc: T0, result: first };
    a.store.apply('Sim-P5-Demo', '3002', { request: queued });
    expect(a.store.request('Sim-P5-Demo', '3002', 'queued')).toEqual(queued);
    a.db.close();
  });
});

describe('request ids (property)', () => {
  type Op = { k: 'trade'; id: number; ok: boolean } | { k: 'turn' } | { k: 'checkpoint' } | { k: 'reload' } | { k: 'release' };
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 6, arbitrary: fc.record({ k: fc.constant('trade' as const), id: fc.integer({ min: 0, max: 12 }), ok: fc.boolean() }) },
    fc.constant({ k: 'turn' as const }),
    fc.constant({ k: 'checkpoint' as const }),
    fc.constant({ k: 'reload' as const }),
    fc.constant({ k: 'release' as const }),
  );
  const lookup = (id: number, seq: number, ok: boolean): RequestLookup => ({
    requestId: `r${id}`, timeMsc: T0 + seq,
    result: ok
      ? { ok: true, retcode: 10009, deals: [], order: { kind: 'order', ticket: 1000 + seq, symbol: 'EURUSD', type: 'Buy', state: 'filled', volume: 0.1, volumeInitial: 0.1, openPrice: 1.1, openTimeMsc: T0 + seq, sl: 0, tp: 0, magic: seq, comment: `c${seq}`, commission: 0, swap: 0, profit: 0 } as never }
      : { ok: false, reason: 'NO_MONEY', message: `no money ${seq}`, retcode: 10019 },
  });

  // Whatever the interleaving of new ids, repeats, commits, checkpoints, restarts and releases (the
  // account let go from memory, refused while it has changes not checkpointed, then loaded again),
  // an id answers the outcome it was first applied with, and an id never applied answers nothing.
  it('an id answers its first outcome across commits, checkpoints, restarts and releases', async () => {
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 1 }), async (ops, ckpt) => {
      const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-'));
      dirs.push(dir);
      const file = join(dir, 'sim.db');
      let db = new Database(file);
      SqliteSimStore.configure(db);
      let store = new SqliteSimStore(db, { checkpointMs: ckpt ? 0 : 1e12 });
      store.createAccount({ server: 'S', login: 'L', passwordHash: 'h', salt: 's', name: 'n', currency: 'USD', leverage: 100, createdMs: T0, balance: 1000, credit: 0 });
      const first = new Map<number, RequestLookup>();
      let seq = 0;
      for (const x of ops) {
        if (x.k === 'trade') {
          const seen = store.request('S', 'L', `r${x.id}`);
          expect(seen ?? undefined).toEqual(first.get(x.id));
          if (!seen) {
            const l = lookup(x.id, ++seq, x.ok);
            store.apply('S', 'L', { request: l });
            first.set(x.id, l);
          }
        } else if (x.k === 'turn') {
          await new Promise((r) => setImmediate(r));
        } else if (x.k === 'checkpoint') {
          store.checkpoint();
        } else if (x.k === 'release') {
          const clean = store.release('S', 'L');
          // Refused only while something is not checkpointed: once it is, the account goes.
          if (!clean) {
            store.checkpoint();
            expect(store.release('S', 'L')).toBe(true);
          }
          expect(store.loadedAccounts).toBe(0);
          expect(store.loadAccount('S', 'L')).not.toBeNull();
          expect(store.loadedAccounts).toBe(1);
        } else {
          store.flush();
          db.close();
          db = new Database(file);
          SqliteSimStore.configure(db);
          store = new SqliteSimStore(db, { checkpointMs: ckpt ? 0 : 1e12 });
          expect(store.loadAccount('S', 'L')).not.toBeNull();
        }
      }
      for (let id = 0; id <= 12; id++) expect(store.request('S', 'L', `r${id}`) ?? undefined).toEqual(first.get(id));
      db.close();
    }), { numRuns: 60 });
  });
});
