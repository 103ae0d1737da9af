// A login's tickets (deals, orders, positions) only go up, over its whole life. Bots poll history
// and new deals by "ticket greater than the last I saw" (the MT4/MT5 habit): a lower ticket is a
// deal they never see. Each shard runs its own simulator over the one SQLite file and takes id
// blocks from it (SimServer.nextId), so a login that traded on one shard's later block and then is
// loaded by another shard (its seat removed and bound again, an account re-bound: one copy of a
// login, docs/simulator.md), or after a restart, or by a shard whose spare block was taken before,
// must not be given the lower ids of that shard's block. Tickets stay unique across the database.
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { SimBrokerConnection } from '../../src/broker/sim.js';
import type { TradeResult } from '../../src/market/orders.js';
import { ManualClock, Simulator } from '../../src/sim/simulator.js';
import { SqliteSimStore } from '../../src/store/simStore.js';
import { T0, testConfig } from '../helpers/sim-helpers.js';

const P5 = 'Sim-P5-Demo';
const P4 = 'Sim-P4-Demo';
const dirs: string[] = [];
const dbs: Database.Database[] = [];
afterEach(() => {
  for (const d of dbs.splice(0)) if (d.open) d.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A turn or three: the group commit, then the checkpoint pass after it. */
const turn = async () => {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
};

/** `n` simulators over one SQLite file, each with its own connection and store (as shards). */
function machine(n: number, checkpointMs = 0) {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-sim-tickets-'));
  dirs.push(dir);
  const file = join(dir, 'sim.db');
  const clock = new ManualClock(T0);
  const start = () => {
    const db = new Database(file);
    dbs.push(db);
    SqliteSimStore.configure(db);
    const store = new SqliteSimStore(db, { checkpointMs });
    return { db, store, sim: new Simulator({ config: testConfig(), store, clock }) };
  };
  return { clock, start, shards: Array.from({ length: n }, start) };
}

type Shard = ReturnType<ReturnType<typeof machine>['start']>;

/** Every ticket a login was given, as its store reads it: deals, history orders, open positions and orders. */
async function tickets(c: SimBrokerConnection, store: SqliteSimStore): Promise<{ deals: number[]; others: number[] }> {
  const open = await c.openedOrders();
  return {
    deals: store.deals(c.server.name, c.login, 0, Number.MAX_SAFE_INTEGER).map((d) => d.ticket),
    others: [
      ...store.historyOrders(c.server.name, c.login, 0, Number.MAX_SAFE_INTEGER).map((o) => o.ticket),
      ...open.positions.map((p) => p.ticket), ...open.orders.map((o) => o.ticket),
    ],
  };
}

/** Moves `login` off `from`: its connection closed and its copy let go (SimServer.forget, as the
 *  shard's account host does when no account of it binds the login any more). */
async function leave(from: Shard, c: SimBrokerConnection) {
  await turn();
  await c.disconnect();
  const server = from.sim.server(c.server.name)!;
  server.forget(c.login);
  for (let i = 0; i < 5 && server.accounts.has(c.login); i++) {
    await turn();
    server.releaseIdle();
  }
  expect(server.accounts.has(c.login)).toBe(false);
}

function ok(r: TradeResult): Extract<TradeResult, { ok: true }> {
  if (!r.ok) throw new Error(`${r.reason}: ${r.message}`);
  return r;
}

const newTickets = (r: Extract<TradeResult, { ok: true }>) => [r.order.ticket, ...r.deals.map((d) => d.ticket)];

/** `login` on `shard`'s P5 server, logged in. */
async function on(shard: Shard, login: string) {
  const c = new SimBrokerConnection(shard.sim, { server: P5, login, password: 'pw' });
  await c.connect();
  return c;
}

const buy = async (c: SimBrokerConnection) => ok(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.1 }));

/** The highest ticket `c`'s login has. */
async function highestOf(c: SimBrokerConnection, store: SqliteSimStore) {
  const t = await tickets(c, store);
  return Math.max(...t.deals, ...t.others);
}

/** 'mover' trades on `shard` and leaves it: its highest ticket. */
async function tradedThenLeft(shard: Shard) {
  const c = await on(shard, 'mover');
  await buy(c);
  const highest = await highestOf(c, shard.store);
  await leave(shard, c);
  return highest;
}

/** A buy on `c`: its order's and deal's tickets are above `highest`. */
async function buysAbove(c: SimBrokerConnection, highest: number) {
  const r = await buy(c);
  for (const t of newTickets(r)) expect(t).toBeGreaterThan(highest);
  return r;
}

describe('a login\'s tickets never go backwards', () => {
  it('traded on a later block of one shard, then on another shard: every new ticket is above every earlier one', async () => {
    const [a, b] = machine(2).shards as [Shard, Shard];
    // Shard a takes its block first (another login trades there), then shard b takes the next.
    const other = await on(a, 'other');
    await buy(other);
    const onB = await on(b, 'mover');
    const first = await buy(onB);
    const highest = await highestOf(onB, b.store);
    await leave(b, onB);

    const onA = await on(a, 'mover');
    const next = await buysAbove(onA, highest);
    const closed = ok(await onA.orderClose({ ticket: first.order.ticket }));
    for (const t of newTickets(closed)) expect(t).toBeGreaterThan(Math.max(...newTickets(next)));
    // The other login on shard a goes on from its block, above its own tickets too.
    await buysAbove(other, await highestOf(other, a.store));
  });

  it('a spare block taken before the login\'s tickets on another shard is not used for it', async () => {
    const [a, b] = machine(2).shards as [Shard, Shard];
    // Shard a uses three quarters of its block: its spare is taken then, before shard b's block,
    // and is below the login's tickets as the rest of the block is.
    const sa = a.sim.server(P5)!;
    for (let i = 0; i < 800; i++) sa.nextId();
    const highest = await tradedThenLeft(b);
    await buysAbove(await on(a, 'mover'), highest);
  });

  it('a checkpoint written before the highest ticket was kept (no lastTicket in it) still loads above every ticket', async () => {
    const [a, b] = machine(2).shards as [Shard, Shard];
    await on(a, 'other');
    const highest = await tradedThenLeft(b);
    // Its checkpoint as an older version wrote it: without the login's highest ticket.
    const row = b.db.prepare("SELECT data FROM sim_state WHERE server = ? AND login = 'mover' AND kind = 'A'").get(P5) as { data: string };
    const cp = JSON.parse(row.data) as Record<string, unknown>;
    delete cp['lastTicket'];
    b.db.prepare("UPDATE sim_state SET data = ? WHERE server = ? AND login = 'mover' AND kind = 'A'").run(JSON.stringify(cp), P5);
    await buysAbove(await on(a, 'mover'), highest);
  });

  it('a fresh block that cannot be written (a full disk) refuses the login, other accounts trade on; its next login goes on above', async () => {
    const [a, b] = machine(2).shards as [Shard, Shard];
    const other = await on(a, 'other');
    const highest = await tradedThenLeft(b);
    // Shard a's store can write no block, and keeps the copy it loads (its checkpoint cannot be written either).
    const { allocateIds, release } = a.store;
    a.store.allocateIds = () => {
      throw new Error('SQLITE_FULL: database or disk is full');
    };
    a.store.release = () => false;
    const onA = new SimBrokerConnection(a.sim, { server: P5, login: 'mover', password: 'pw' });
    await expect(onA.connect()).rejects.toThrow(/SQLITE_FULL/);
    expect(a.sim.server(P5)!.accounts.has('mover')).toBe(true);
    // The others go on from the shard's block, with no write.
    await buysAbove(other, await highestOf(other, a.store));

    a.store.allocateIds = allocateIds;
    a.store.release = release;
    await onA.connect();
    await buysAbove(onA, highest);
  });

  // Whatever the sequence of trades, moves between 2-3 shards, other logins' trades on a shard
  // (ids used up, spare blocks taken), and restarts (graceful or a crash after the last reply), with
  // or without checkpoints: each new ticket of a login is above all of its earlier ones, and no
  // ticket is given twice in the database.
  it('over random moves, trades and restarts across shards sharing one store', async () => {
    const LOGINS = [{ login: 'L0', server: P5 }, { login: 'L1', server: P4 }, { login: 'L2', server: P5 }, { login: 'L3', server: P4 }] as const;
    const who = fc.integer({ min: 0, max: LOGINS.length - 1 });
    const op = fc.oneof(
      { weight: 3, arbitrary: fc.record({ k: fc.constant('buy' as const), who, vol: fc.integer({ min: 1, max: 3 }) }) },
      fc.record({ k: fc.constant('close' as const), who, pick: fc.nat(), part: fc.boolean() }),
      fc.record({ k: fc.constant('pending' as const), who }),
      fc.record({ k: fc.constant('delete' as const), who, pick: fc.nat() }),
      { weight: 3, arbitrary: fc.record({ k: fc.constant('move' as const), who, to: fc.nat() }) },
      // Ids other logins use on a shard: often enough to take its spare block (at 3/4 of 1,024).
      { weight: 2, arbitrary: fc.record({ k: fc.constant('burn' as const), shard: fc.nat(), p4: fc.boolean(), n: fc.oneof(fc.integer({ min: 1, max: 1100 }), fc.integer({ min: 700, max: 1000 })) }) },
      { weight: 2, arbitrary: fc.record({ k: fc.constant('restart' as const), shard: fc.nat(), crash: fc.boolean() }) },
    );
    await fc.assert(fc.asyncProperty(fc.integer({ min: 2, max: 3 }), fc.boolean(), fc.array(op, { minLength: 1, maxLength: 40 }), async (n, ckpt, ops) => {
      const m = machine(n, ckpt ? 0 : 1e12);
      const shards = m.shards;
      const logins = LOGINS.map((l, i) => ({ ...l, at: Math.floor(i / 2) % n, conn: undefined as SimBrokerConnection | undefined, seen: new Set<number>(), max: 0 }));
      const conn = async (l: (typeof logins)[number]) => {
        if (!l.conn) {
          l.conn = new SimBrokerConnection(shards[l.at]!.sim, { server: l.server, login: l.login, password: 'pw' });
          await l.conn.connect();
        }
        return l.conn;
      };
      /** The login's tickets not seen before are all above those seen before. */
      const check = async (l: (typeof logins)[number]) => {
        const t = await tickets(await conn(l), shards[l.at]!.store);
        const fresh = [...new Set([...t.deals, ...t.others])].filter((x) => !l.seen.has(x));
        for (const x of fresh) expect(x, `${l.login}: new ticket ${x} after ${l.max}`).toBeGreaterThan(l.max);
        for (const x of fresh) l.seen.add(x);
        l.max = Math.max(l.max, ...fresh);
      };
      // Each login's account is created on its first shard: every shard has taken a block.
      for (const l of logins) await check(l);
      for (const x of ops) {
        m.clock.advance(1_000);
        if (x.k === 'burn' || x.k === 'restart') {
          const s = x.shard % n;
          if (x.k === 'burn') {
            const server = shards[s]!.sim.server(x.p4 ? P4 : P5)!;
            for (let i = 0; i < x.n; i++) server.nextId();
            continue;
          }
          const here = logins.filter((l) => l.at === s && l.conn);
          if (x.crash) {
            await turn(); // every reply has its commit; a checkpoint pass may not have run
            shards[s]!.db.close();
          } else {
            for (const l of here) await l.conn!.disconnect();
            shards[s]!.sim.stop();
            shards[s]!.db.close();
          }
          shards[s] = m.start();
          for (const l of here) l.conn = undefined;
          continue;
        }
        const l = logins[x.who]!;
        const c = await conn(l);
        if (x.k === 'move') {
          const to = x.to % n;
          if (to === l.at) continue;
          await leave(shards[l.at]!, c);
          l.conn = undefined;
          l.at = to;
        } else if (x.k === 'buy') {
          ok(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: x.vol / 10 }));
        } else if (x.k === 'pending') {
          const q = (await c.quote('EURUSD'))!;
          ok(await c.orderSend({ symbol: 'EURUSD', type: 'BuyLimit', volume: 0.1, price: +(q.ask - 0.01).toFixed(5) }));
        } else {
          const open = await c.openedOrders();
          if (x.k === 'close') {
            const p = open.positions[x.pick % Math.max(1, open.positions.length)];
            if (p) ok(await c.orderClose({ ticket: p.ticket, ...(x.part && p.volume > 0.1 + 1e-9 ? { lots: 0.1 } : {}) }));
          } else {
            const o = open.orders[x.pick % Math.max(1, open.orders.length)];
            if (o) ok(await c.orderDelete({ ticket: o.ticket }));
          }
        }
        await check(l);
      }
      // Unique across the database (ids are per server, as on a broker): a ticket belongs to one
      // login, and a deal's ticket is no other record's.
      for (const server of [P5, P4]) {
        const owner = new Map<number, string>();
        const deals = new Set<number>();
        for (const l of logins.filter((x) => x.server === server)) {
          const t = await tickets(await conn(l), shards[l.at]!.store);
          for (const d of t.deals) {
            expect(deals.has(d), `deal ticket ${d} given twice`).toBe(false);
            deals.add(d);
          }
          for (const x of [...t.deals, ...t.others]) {
            expect(owner.get(x) ?? l.login, `ticket ${x} of two logins`).toBe(l.login);
            owner.set(x, l.login);
          }
          for (const x of t.others) expect(deals.has(x), `ticket ${x} both a deal and an order`).toBe(false);
        }
      }
      for (const s of shards) if (s.db.open) s.db.close();
    }), { numRuns: 100 });
  }, 120_000);
});
