// The simulator's journal rows after an account's checkpoint are found at a restart from the
// account's mark in sim_dirty (src/store/simDirty.ts), not from an index of the journal by account:
// the mark is committed with the first row after a checkpoint and deleted with the checkpoint that
// covers it; a database written with the index gets its marks from it, and loses it.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';
import { until } from '../helpers/until.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempFile = () => {
  const d = mkdtempSync(join(tmpdir(), 'tagw-sim-marks-'));
  dirs.push(d);
  return join(d, 'sim.db');
};
function open(file: string, checkpointMs: number) {
  const db = new Database(file);
  SqliteSimStore.configure(db);
  return { db, store: new SqliteSimStore(db, { checkpointMs }) };
}
const marks = (db: Database.Database) => db.prepare('SELECT login, seq FROM sim_dirty ORDER BY login').all() as { login: string; seq: number }[];
const turn = () => new Promise((r) => setImmediate(r));

/** Two accounts trading on one store; returns what each looks like. */
async function trade(store: SqliteSimStore, clock: ManualClock, logins: string[]) {
  const sim = new Simulator({ config: testConfig(), store, clock });
  const out: Record<string, unknown> = {};
  // Connected first: creating an account checkpoints every account.
  const conns = new Map<string, SimBrokerConnection>();
  for (const login of logins) {
    conns.set(login, new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login, password: 'pw' }));
    await conns.get(login)!.connect();
  }
  for (const login of logins) {
    const c = conns.get(login)!;
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.2 }, { requestId: `${login}-1` });
    if (!buy.ok) throw new Error(buy.message);
    clock.advance(5_000);
    await c.orderClose({ ticket: buy.order.ticket, lots: 0.1 }, { requestId: `${login}-2` });
    out[login] = await persisted(c);
  }
  return out;
}
/** What the store keeps of an account (not what the market makes of it: prices move between simulators). */
async function persisted(c: SimBrokerConnection) {
  const open = await c.openedOrders();
  return {
    balance: (await c.accountSummary()).balance,
    positions: open.positions.map((p) => ({ ticket: p.ticket, volume: p.volume, openPrice: p.openPrice })),
    orders: open.orders.map((o) => o.ticket),
    deals: await c.historyDeals(0, T0 + 1e9),
  };
}
async function state(store: SqliteSimStore, clock: ManualClock, logins: string[]) {
  const sim = new Simulator({ config: testConfig(), store, clock });
  const out: Record<string, unknown> = {};
  for (const login of logins) {
    const c = new SimBrokerConnection(sim, { server: 'Sim-P5-Demo', login, password: 'pw' });
    await c.connect();
    out[login] = await persisted(c);
  }
  return out;
}

describe('sim_dirty marks', () => {
  it('a mark is committed with the first row after a checkpoint and deleted with the checkpoint that covers it', async () => {
    const file = tempFile();
    const clock = new ManualClock(T0);
    const a = open(file, 1e12); // no checkpoint but the account's creation and explicit ones
    await trade(a.store, clock, ['4001', '4002']);
    const after = marks(a.db);
    expect(after.map((m) => m.login)).toEqual(['4001', '4002']);
    // Each mark is the account's first row after its checkpoint.
    const checkpointSeq = (login: string) => (JSON.parse((a.db.prepare("SELECT data FROM sim_state WHERE login = ? AND kind = 'A'").get(login) as { data: string }).data) as { seq: number }).seq;
    expect(after.map((m) => m.seq)).toEqual(['4001', '4002'].map((l) => checkpointSeq(l) + 1));
    a.store.checkpoint();
    expect(marks(a.db)).toEqual([]);
    a.db.close();
  });

  it('a crash with rows after the checkpoints: the restart replays them, and keeps the marks until a checkpoint', async () => {
    const file = tempFile();
    const clock = new ManualClock(T0);
    const a = open(file, 1e12);
    const before = await trade(a.store, clock, ['4011', '4012', '4013']);
    await turn();
    a.db.close(); // a crash: nothing flushed
    const b = open(file, 1e12);
    expect(await state(b.store, clock, ['4011', '4012', '4013'])).toEqual(before);
    expect(marks(b.db).map((m) => m.login)).toEqual(['4011', '4012', '4013']);
    b.store.checkpoint();
    expect(marks(b.db)).toEqual([]);
    b.db.close();
    const c = open(file, 1e12);
    expect(await state(c.store, clock, ['4011', '4012', '4013'])).toEqual(before);
    c.db.close();
  });

  it('a change without a time of its own, made after a restart that replayed later rows, is replayed by the next restart', () => {
    // The restart's replay reads rows from the oldest mark's time on: a row journaled after the
    // restart must not be timed before the rows it replayed (it would be skipped by the next one).
    const file = tempFile();
    const account = { server: 'S', login: '4041', passwordHash: 'h', salt: 's', name: 'n', currency: 'USD', leverage: 100, createdMs: T0, balance: 1000, credit: 0 };
    const a = open(file, 1e12);
    a.store.createAccount(account); // checkpointed at T0
    a.store.apply('S', '4041', { balance: 1100, equity: { timeMsc: T0 + 60_000, balance: 1100, equity: 1100 } as never });
    a.store.commitQueued();
    a.db.close(); // a crash: the row at T0 + 60 s and its mark, no checkpoint
    const b = open(file, 1e12);
    expect(b.store.loadAccount('S', '4041')?.account.balance).toBe(1100);
    b.store.apply('S', '4041', { balance: 1200 }); // no time of its own
    b.store.commitQueued();
    b.db.close(); // a second crash before any checkpoint
    const c = open(file, 1e12);
    expect(c.store.loadAccount('S', '4041')?.account.balance).toBe(1200);
    c.db.close();
  });

  it('a shard that went quiet still checkpoints its dirty accounts (one timer), so no mark stays behind', async () => {
    const file = tempFile();
    const clock = new ManualClock(T0);
    const a = open(file, 200);
    // Created (checkpointed) just now: the trades' rows are not due for a checkpoint at the pass after them.
    await trade(a.store, clock, ['4031']);
    await turn();
    await turn();
    expect(marks(a.db).map((m) => m.login)).toEqual(['4031']);
    // Nothing else is committed; the late pass writes the checkpoint and clears the mark.
    await until(() => marks(a.db).length === 0, 'the late checkpoint pass', 5_000);
    a.db.close();
  });

  it('a database written with the journal index by account gets its marks from it, and loses the index', async () => {
    const file = tempFile();
    const clock = new ManualClock(T0);
    const a = open(file, 1e12);
    const before = await trade(a.store, clock, ['4021', '4022']);
    a.store.checkpoint(); // 4021 and 4022 checkpointed; then more rows for 4022 only
    const more = await trade(a.store, clock, ['4022']);
    a.db.close();
    // As an older build left it: the index, no marks.
    const old = new Database(file);
    old.exec('DROP TABLE sim_dirty; CREATE INDEX sim_journal_account ON sim_journal(server, login, seq);');
    old.close();
    const b = open(file, 1e12);
    expect(marks(b.db).map((m) => m.login)).toEqual(['4022']);
    expect(b.db.prepare("SELECT name FROM sqlite_master WHERE name = 'sim_journal_account'").get()).toBeUndefined();
    expect(await state(b.store, clock, ['4021', '4022'])).toEqual({ '4021': before['4021'], '4022': more['4022'] });
    b.db.close();
  });
});
