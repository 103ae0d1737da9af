// Checkpoints of simulated accounts, version 2 (src/store/simCheckpoint.ts): a row per open
// position and active order, only the changed ones rewritten; a restart keeps the engine's order of
// positions and orders; a version 1 checkpoint (everything inline in the account row) still loads
// and is rewritten as version 2.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function openAt(file: string, clock: ManualClock) {
  const db = new Database(file);
  SqliteSimStore.configure(db);
  const store = new SqliteSimStore(db, { checkpointMs: 1e12 });
  const sim = new Simulator({ config: testConfig(), store, clock });
  // Closed as a restart does: what the last turn applied committed first.
  const close = () => {
    store.commitQueued();
    db.close();
  };
  return { db, store, sim, close };
}

async function login(sim: Simulator, server: string, login = '5001') {
  const c = new SimBrokerConnection(sim, { server, login, password: 'pw' });
  await c.connect();
  return c;
}

const tmpFile = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-simcp-'));
  dirs.push(dir);
  return join(dir, 'sim.db');
};

describe('simulator checkpoints (version 2)', () => {
  it('an order at 100 open positions rewrites its own rows, not the 100', async () => {
    const clock = new ManualClock(T0);
    const a = openAt(tmpFile(), clock);
    const c = await login(a.sim, 'Sim-P5-Demo');
    for (let i = 0; i < 100; i++) expect((await c.orderSend({ symbol: 'BTCUSD', type: i % 2 ? 'Sell' : 'Buy', volume: 0.01 })).ok).toBe(true);
    a.store.checkpoint();
    const kinds = () => Object.fromEntries((a.db.prepare("SELECT kind, count(*) AS n FROM sim_state WHERE login = '5001' GROUP BY kind").all() as { kind: string; n: number }[]).map((r) => [r.kind, r.n]));
    expect(kinds()).toMatchObject({ A: 1, P: 100 });
    // Count the rows a checkpoint writes (a temp trigger logs every insert and delete).
    a.db.exec(`CREATE TEMP TABLE written (kind TEXT, op TEXT);
      CREATE TEMP TRIGGER w_ins AFTER INSERT ON main.sim_state BEGIN INSERT INTO written VALUES (new.kind, 'put'); END;
      CREATE TEMP TRIGGER w_del AFTER DELETE ON main.sim_state BEGIN INSERT INTO written VALUES (old.kind, 'del'); END;`);
    const written = () => (a.db.prepare("SELECT kind || ':' || op AS w FROM written ORDER BY rowid").all() as { w: string }[]).map((r) => r.w).filter((w) => w !== 'A:del');
    const r = await c.orderSend({ symbol: 'BTCUSD', type: 'Buy', volume: 0.01 });
    if (!r.ok) throw new Error(r.message);
    a.store.checkpoint();
    expect(written().sort()).toEqual(['A:put', 'P:put']);
    a.db.exec('DELETE FROM written');
    expect((await c.orderClose({ ticket: r.order.ticket })).ok).toBe(true);
    a.store.checkpoint();
    expect(written().sort()).toEqual(['A:put', 'P:del']);
    expect(kinds()).toMatchObject({ A: 1, P: 100 });
    a.close();
  });

  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: a restart from checkpoints restores positions and orders in the engine order', async (server) => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.record({ op: fc.integer({ min: 0, max: 5 }), pick: fc.nat() }), { minLength: 4, maxLength: 30 }), async (ops) => {
        const file = tmpFile();
        const clock = new ManualClock(T0);
        const a = openAt(file, clock);
        const c = await login(a.sim, server);
        for (const x of ops) {
          const { positions, orders } = await c.openedOrders();
          const q = (await c.quote('EURUSD'))!;
          if (x.op === 0) await c.orderSend({ symbol: 'EURUSD', type: x.pick % 2 ? 'Sell' : 'Buy', volume: 0.1 });
          // Limits one point inside the market's next moves: some fill later, after newer positions
          // (a position whose ticket is older than those it follows).
          else if (x.op === 1) await c.orderSend({ symbol: 'EURUSD', type: x.pick % 2 ? 'SellLimit' : 'BuyLimit', volume: 0.1, price: +(x.pick % 2 ? q.bid + 0.0001 : q.ask - 0.0001).toFixed(5) });
          else if (x.op === 2 && positions.length) await c.orderClose({ ticket: positions[x.pick % positions.length]!.ticket, lots: 0.05 });
          else if (x.op === 3 && positions.length) await c.orderClose({ ticket: positions[x.pick % positions.length]!.ticket });
          else if (x.op === 4 && orders.length) await c.orderDelete({ ticket: orders[x.pick % orders.length]!.ticket });
          else {
            clock.advance(1000 + (x.pick % 60_000));
            a.sim.advance();
          }
          if (x.pick % 3 === 0) a.store.checkpoint();
        }
        a.store.checkpoint();
        const before = { open: await c.openedOrders(), sum: await c.accountSummary() };
        a.close();
        const b = openAt(file, clock);
        const c2 = await login(b.sim, server);
        expect(await c2.openedOrders()).toEqual(before.open);
        expect(await c2.accountSummary()).toEqual(before.sum);
        b.close();
      }),
      { numRuns: 10 },
    );
  });

  it('a version 1 checkpoint (positions and orders inline) loads, and is rewritten as version 2', async () => {
    const file = tmpFile();
    const clock = new ManualClock(T0);
    const a = openAt(file, clock);
    const c = await login(a.sim, 'Sim-P4-Demo');
    const q = (await c.quote('EURUSD'))!;
    for (let i = 0; i < 5; i++) await c.orderSend({ symbol: 'EURUSD', type: i % 2 ? 'Sell' : 'Buy', volume: 0.1 }, { requestId: `v1-${i}` });
    await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.2, price: +(q.ask - 0.01).toFixed(5) });
    a.store.checkpoint();
    const after = await c.orderSend({ symbol: 'EURUSD', type: 'Sell', volume: 0.3 }); // journaled after the checkpoint
    if (!after.ok) throw new Error(after.message);
    const before = { open: await c.openedOrders(), sum: await c.accountSummary(), deals: await c.historyDeals(0, T0 + 1e9) };
    // Write the checkpoint as version 1 did: one row, the records inline in the engine's order.
    const rows = (kind: string) => (a.db.prepare("SELECT data FROM sim_state WHERE login = '5001' AND kind = ? ORDER BY key").all(kind) as { data: string }[]).map((r) => JSON.parse(r.data) as object);
    const acc = JSON.parse((a.db.prepare("SELECT data FROM sim_state WHERE login = '5001' AND kind = 'A'").get() as { data: string }).data) as { v?: number };
    delete acc.v;
    a.db.prepare("UPDATE sim_state SET data = ? WHERE login = '5001' AND kind = 'A'").run(JSON.stringify({ ...acc, positions: rows('P'), activeOrders: rows('O') }));
    a.db.prepare("DELETE FROM sim_state WHERE login = '5001' AND kind IN ('P', 'O')").run();
    a.close();

    const b = openAt(file, clock);
    const c2 = await login(b.sim, 'Sim-P4-Demo');
    expect(await c2.openedOrders()).toEqual(before.open);
    expect(await c2.accountSummary()).toEqual(before.sum);
    expect(await c2.historyDeals(0, T0 + 1e9)).toEqual(before.deals);
    expect(await c2.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 }, { requestId: 'v1-2' })).toMatchObject({ ok: true });
    b.store.checkpoint();
    const cp = JSON.parse((b.db.prepare("SELECT data FROM sim_state WHERE login = '5001' AND kind = 'A'").get() as { data: string }).data) as { v?: number; positions?: unknown };
    expect(cp.v).toBe(2);
    expect(cp.positions).toBeUndefined();
    b.close();
    const d = openAt(file, clock);
    expect(await (await login(d.sim, 'Sim-P4-Demo')).openedOrders()).toEqual(before.open);
    d.close();
  });
});
