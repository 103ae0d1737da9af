// A simulated account nobody is logged in to and with nothing open (no position, no pending order:
// nothing a tick or the clock acts on) is let go from the shard's memory once its store holds all
// of it, and loaded again, the same, at the next login: under seat churn (a deleted seat's login,
// tests and benches binding fresh logins all day) the shard held every login ever used. An account
// with something open stays, and its triggers keep running with no connection, as a broker's do.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { MemorySimStore } from '../../src/store/memorySimStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const SERVER = 'Sim-P5-Demo';
const dirs: string[] = [];
const dbs: Database.Database[] = [];
afterEach(() => {
  for (const d of dbs.splice(0)) d.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A simulator over SQLite in a temp dir (checkpoints due at once: a turn after each commit). */
function world(checkpointMs = 0) {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-release-'));
  dirs.push(dir);
  const db = new Database(join(dir, 'sim.db'));
  dbs.push(db);
  SqliteSimStore.configure(db);
  const store = new SqliteSimStore(db, { checkpointMs });
  const clock = new ManualClock(T0);
  const sim = new Simulator({ config: testConfig(), store, clock });
  const server = sim.server(SERVER)!;
  const conn = (login: string, password = 'pw') => new SimBrokerConnection(sim, { server: SERVER, login, password });
  const held = (login: string) => server.accounts.has(login);
  return { db, store, clock, sim, server, conn, held };
}

/** A few turns: the group commit, then the checkpoint pass after it (checkpointMs 0: all due). */
const turn = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

/** Everything a client can read of an account. */
async function view(c: SimBrokerConnection, store: { equity(s: string, l: string, from: number): unknown }) {
  return {
    summary: await c.accountSummary(), details: await c.accountDetails(), open: await c.openedOrders(),
    deals: await c.historyDeals(0, T0 + 1e10), orders: await c.historyOrders(0, T0 + 1e10), equity: store.equity(SERVER, c.login, 0),
  };
}

describe('a simulated account nobody uses is let go from memory', () => {
  it('when its last connection closes with nothing open, and logs in again to the same account, history and request ids', async () => {
    const w = world();
    const c = w.conn('7001');
    await c.connect();
    const q = (await c.quote('EURUSD'))!;
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.2 }, { requestId: 'r1' });
    if (!buy.ok) throw new Error(buy.message);
    w.clock.advance(5_000);
    await c.orderClose({ ticket: buy.order.ticket }, { requestId: 'r2' });
    const pend = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(q.ask - 0.005).toFixed(5) }, { requestId: 'r3' });
    if (!pend.ok) throw new Error(pend.message);
    await c.orderDelete({ ticket: pend.order.ticket }, { requestId: 'r4' });
    const before = await view(c, w.store);
    expect(before.deals.length).toBeGreaterThan(2);
    await turn(); // the commit's checkpoint: nothing of it is only in memory now
    expect(w.store.loadedAccounts).toBe(1);

    await c.disconnect();
    expect(w.held('7001')).toBe(false);
    expect(w.store.loadedAccounts).toBe(0);
    expect(w.server.busy.size + w.server.sinks.size).toBe(0);

    // The same connection object logs in again (a reconnect), and so does another.
    await c.connect();
    expect(w.held('7001')).toBe(true);
    expect(await view(c, w.store)).toEqual(before);
    // Request ids still answer their first outcome: a resend does not trade again.
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.2 }, { requestId: 'r1' })).toEqual(buy);
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: 1 }, { requestId: 'r3' })).toEqual(pend);
    expect((await c.openedOrders()).positions).toHaveLength(0);
    // Its password is still its own.
    await expect(w.conn('7001', 'wrong').connect()).rejects.toThrow(/invalid password/);
    const next = await c.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.1 });
    if (!next.ok) throw new Error(next.message);
    expect(before.deals.map((d) => d.ticket)).not.toContain(next.deals[0]!.ticket);
    await c.disconnect();
  });

  it('not before its changes are checkpointed: held until then, let go at the next minute of the clock', async () => {
    const w = world(60_000);
    const c = w.conn('7002');
    await c.connect();
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    if (!buy.ok) throw new Error(buy.message);
    await c.orderClose({ ticket: buy.order.ticket });
    const before = await view(c, w.store);
    await c.disconnect();
    // Its changes are in the journal, not in a checkpoint yet: the mirror holds what a load needs.
    expect(w.held('7002')).toBe(true);
    expect(w.store.loadedAccounts).toBe(1);
    w.store.checkpoint();
    w.clock.advance(60_000);
    w.sim.advance();
    expect(w.held('7002')).toBe(false);
    expect(w.store.loadedAccounts).toBe(0);
    await c.connect();
    expect(await view(c, w.store)).toEqual(before);
  });

  it('not while another connection is logged in to it (a bind probe beside the account\'s connection)', async () => {
    const w = world();
    const a = w.conn('7003');
    const b = w.conn('7003');
    await a.connect();
    await b.connect();
    await turn();
    await b.disconnect();
    expect(w.held('7003')).toBe(true);
    expect((await a.accountSummary()).balance).toBeGreaterThan(0);
    await a.disconnect();
    expect(w.held('7003')).toBe(false);
    // Disconnecting again, or a connection that never logged in, lets go of nothing twice.
    await a.disconnect();
    await w.conn('7003').disconnect();
    await a.connect();
    await b.connect();
    await b.disconnect();
    expect(w.held('7003')).toBe(true);
  });

  it('not while it has a position or a pending order: their triggers run with no connection, then it goes', async () => {
    const w = world();
    const c = w.conn('7004');
    await c.connect();
    const q = (await c.quote('EURUSD'))!;
    // A limit far from the market that expires in 90 s, and a position.
    const pend = await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(q.ask - 0.02).toFixed(5), expiration: T0 + 90_000 });
    if (!pend.ok) throw new Error(pend.message);
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    if (!buy.ok) throw new Error(buy.message);
    await turn();
    await c.disconnect();
    expect(w.held('7004')).toBe(true);
    w.clock.advance(120_000);
    w.sim.advance();
    await turn();
    // The order expired with nobody logged in; the position keeps it held.
    expect(w.store.historyOrders(SERVER, '7004', 0, T0 + 1e10).find((o) => o.ticket === pend.order.ticket)?.state).toBe('expired');
    expect(w.held('7004')).toBe(true);
    await c.connect();
    await c.orderClose({ ticket: buy.order.ticket });
    const before = await view(c, w.store);
    await turn();
    await c.disconnect();
    expect(w.held('7004')).toBe(false);
    await c.connect();
    expect(await view(c, w.store)).toEqual(before);
  });

  it('a refused login (wrong password) does not keep the account it loaded', async () => {
    const w = world();
    const c = w.conn('7005');
    await c.connect();
    await turn();
    await c.disconnect();
    expect(w.held('7005')).toBe(false);
    await expect(w.conn('7005', 'wrong').connect()).rejects.toThrow(/invalid password/);
    expect(w.held('7005')).toBe(false);
    expect(w.store.loadedAccounts).toBe(0);
  });

  it('on the in-memory store too (its records are the store itself)', async () => {
    const store = new MemorySimStore();
    const sim = new Simulator({ config: testConfig(), store, clock: new ManualClock(T0) });
    const c = new SimBrokerConnection(sim, { server: SERVER, login: '7006', password: 'pw' });
    await c.connect();
    const buy = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 });
    if (!buy.ok) throw new Error(buy.message);
    await c.orderClose({ ticket: buy.order.ticket });
    const before = await view(c, store);
    await c.disconnect();
    expect(sim.server(SERVER)!.accounts.has('7006')).toBe(false);
    await c.connect();
    expect(await view(c, store)).toEqual(before);
  });
});

describe('letting accounts go is invisible to their clients (property)', () => {
  type Cmd = { k: 'buy'; lots: number } | { k: 'pending'; offset: number } | { k: 'closeAll' } | { k: 'wait'; ms: number } | { k: 'away' };
  const cmd: fc.Arbitrary<Cmd> = fc.oneof(
    fc.record({ k: fc.constant('buy' as const), lots: fc.integer({ min: 1, max: 30 }) }),
    fc.record({ k: fc.constant('pending' as const), offset: fc.integer({ min: 20, max: 200 }) }),
    fc.constant({ k: 'closeAll' as const }),
    fc.record({ k: fc.constant('wait' as const), ms: fc.integer({ min: 100, max: 90_000 }) }),
    { weight: 2, arbitrary: fc.constant({ k: 'away' as const }) },
  );

  // Two simulators run the same commands; at each 'away' both connections disconnect, the clock
  // moves a second (and a turn passes: checkpoints), and they log in again. One of them lets its
  // idle account go meanwhile (the other keeps it, as before): what the clients read is the same.
  it('the same trades, books and history with and without the release', async () => {
    await fc.assert(fc.asyncProperty(fc.array(cmd, { minLength: 1, maxLength: 25 }), async (cmds) => {
      const runs = [world(), world()];
      const conns = runs.map((w) => w.conn('7100'));
      for (const c of conns) await c.connect();
      const seen: unknown[][] = [[], []];
      for (const x of cmds) {
        for (let i = 0; i < 2; i++) {
          const w = runs[i]!;
          const c = conns[i]!;
          const out = seen[i]!;
          if (x.k === 'buy') out.push(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: x.lots / 100 }, { requestId: `b${out.length}` }));
          else if (x.k === 'pending') {
            const q = (await c.quote('EURUSD'))!;
            out.push(await c.orderSend({ symbol: 'EURUSD', type: 'SellLimit', volume: 0.1, price: +(q.bid + x.offset * 1e-5).toFixed(5) }));
          } else if (x.k === 'closeAll') {
            const open = await c.openedOrders();
            for (const p of open.positions) out.push(await c.orderClose({ ticket: p.ticket }));
            for (const o of open.orders) out.push(await c.orderDelete({ ticket: o.ticket }));
          } else if (x.k === 'wait') {
            w.clock.advance(x.ms);
            w.sim.advance();
          } else {
            // Run 0 keeps the account: a second connection stays logged in across the gap.
            const keep = i === 0 ? w.conn('7100') : undefined;
            if (keep) await keep.connect();
            await c.disconnect();
            w.clock.advance(1000);
            w.sim.advance();
            await turn();
            w.clock.advance(60_000);
            w.sim.advance();
            const held = w.held('7100');
            await c.connect();
            await keep?.disconnect();
            // Let go exactly when nothing was open (run 1); kept by its second connection (run 0).
            const open = await c.openedOrders();
            expect(held).toBe(i === 0 || open.positions.length + open.orders.length > 0);
          }
          out.push(await view(c, w.store));
        }
      }
      expect(seen[1]).toEqual(seen[0]);
      for (const d of dbs.splice(0)) d.close();
    }), { numRuns: 40 });
  }, 120_000);
});
