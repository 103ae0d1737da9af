// The simulator store's mirror keeps only what changed since the last checkpoint (issue 19: a copy
// of every open position lived as long as the position), and of the request ids not yet in a
// batch only the ids. Property: for random sequences of changes and checkpoints, sim_state holds
// exactly the rows the earlier mirror wrote (a full copy of every open record, a { rec, key }
// entry per written row, rewritten when its record object changed; an [id, time, seq] per new
// request id), with the same keys, and a restart loads the same open records in the same order.
// A checkpoint that meets a full disk (SQLITE_FULL at any of its writes) changes nothing, on disk
// or in the mirror: the next one writes what it would have (before, the store stopped its shard).
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Order } from '../../src/market/orders.js';
import type { SimChange, StoredAccount, StoredPosition } from '../../src/sim/persistence.js';
import { createLogger } from '../../src/log.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { SqliteSimStore } from '../../src/store/simStore.js';

const T0 = 1_767_225_600_000;
const account: StoredAccount = { server: 'S', login: '1', passwordHash: 'h', salt: 's', name: 'n', currency: 'USD', leverage: 100, createdMs: T0, balance: 1000, credit: 0 };

const position = (ticket: number, n: number): StoredPosition => ({
  ticket, symbol: 'EURUSD', type: n % 2 ? 'Sell' : 'Buy', volume: 0.01 * (1 + (n % 7)), openPrice: 1.1 + n / 1e5, openTimeMsc: T0 + ticket,
  sl: 0, tp: n % 3 ? 0 : 1.2, magic: 0, comment: '', commission: -0.07, swapPaid: 0,
});
const order = (ticket: number, n: number, state: Order['state']): Order => ({
  kind: 'order', ticket, symbol: 'EURUSD', type: 'BuyLimit', state, volume: 0.1, volumeInitial: 0.1, openPrice: 1.05 + n / 1e5,
  openTimeMsc: T0 + ticket, sl: 0, tp: 0, magic: n, comment: '', commission: 0, swap: 0, profit: 0, positionId: 0,
});

/** The mirror as it was before: every open record, and per written row its record and key. */
class FormerMirror {
  readonly positions = new Map<number, StoredPosition>();
  readonly orders = new Map<number, Order>();
  private readonly written = { P: new Map<number, { rec: unknown; key: string }>(), O: new Map<number, { rec: unknown; key: string }>() };
  private next = 0;
  readonly rows = new Map<string, string>();
  private readonly refs = new Set<string>();
  private newRefs: [string, number, number][] = [];
  private seq = 0;

  apply(c: SimChange, time: number): void {
    this.seq++;
    if (c.request && !this.refs.has(c.request.requestId)) {
      this.refs.add(c.request.requestId);
      this.newRefs.push([c.request.requestId, time, this.seq]);
    }
    for (const o of c.orders ?? []) if (o.doneMs === null) this.orders.set(o.order.ticket, o.order);
    else this.orders.delete(o.order.ticket);
    for (const p of c.positions ?? []) this.positions.set(p.ticket, { ...p });
    for (const t of c.closedPositions ?? []) this.positions.delete(t);
  }

  /** A restart counts keys on from the largest key of the rows it reads. */
  restart(): void {
    this.next = Math.max(0, ...[...this.written.P.values(), ...this.written.O.values()].map((w) => Number(w.key)));
  }

  checkpoint(): void {
    this.sync('P', this.positions);
    this.sync('O', this.orders);
    if (this.newRefs.length > 0) {
      const [, t, q] = this.newRefs[this.newRefs.length - 1]!;
      this.rows.set(`R:${String(t).padStart(15, '0')}:${String(q).padStart(12, '0')}`, JSON.stringify(this.newRefs));
      this.newRefs = [];
    }
  }

  private sync(kind: 'P' | 'O', current: Map<number, unknown>): void {
    const written = this.written[kind];
    for (const [ticket, rec] of current) {
      let w = written.get(ticket);
      if (w?.rec === rec) continue;
      if (w) w.rec = rec;
      else written.set(ticket, (w = { rec, key: String(++this.next).padStart(12, '0') }));
      this.rows.set(`${kind}:${w.key}`, JSON.stringify(rec));
    }
    for (const [ticket, w] of written) {
      if (current.has(ticket)) continue;
      this.rows.delete(`${kind}:${w.key}`);
      written.delete(ticket);
    }
  }
}

const rowsOf = (db: Database.Database) =>
  new Map((db.prepare("SELECT kind, key, data FROM sim_state WHERE kind IN ('P', 'O', 'R')").all() as { kind: string; key: string; data: string }[]).map((r) => [`${r.kind}:${r.key}`, r.data]));

/** open, change, close a position; place, change, finish an order; checkpoint; restart; a checkpoint on a full disk; a release and reload */
const op = fc.record({ kind: fc.integer({ min: 0, max: 9 }), pick: fc.nat(), n: fc.nat({ max: 1000 }), id: fc.option(fc.integer({ min: 0, max: 20 })) });

describe('simulator store: the mirror keeps only what changed since the checkpoint', () => {
  it('writes the same rows, under the same keys, as the full mirror did, and restarts to the same records', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 60 }), (ops) => {
        const db = new Database(':memory:');
        // A full disk at the checkpoint's (failAt)-th row write, as SQLite reports it (SQLITE_FULL).
        let failAt = 0;
        db.function('full_now', { deterministic: false }, () => {
          if (failAt > 0 && --failAt === 0) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
          return 0;
        });
        const fullDisk = new FullDisk({ log: createLogger('silent'), retryMs: 1e9 });
        let store = new SqliteSimStore(db, { groupCommit: false, checkpointMs: 1e12, fullDisk });
        for (const [table, event] of [['sim_state', 'INSERT'], ['sim_state', 'DELETE'], ['sim_dirty', 'DELETE']]) {
          db.exec(`CREATE TEMP TRIGGER full_${table}_${event} BEFORE ${event} ON ${table} WHEN full_now() BEGIN SELECT 1; END`);
        }
        store.createAccount(account);
        store.loadAccount('S', '1');
        const model = new FormerMirror();
        let ticket = 1000;
        let now = T0 + 10_000;
        let id: number | null = null;
        const apply = (c: SimChange) => {
          // Each change carries a later instant (an equity point), as the engine's trades do: a
          // position-only change takes the account's last journal time, which a restart does not
          // bring forward from the rows it replays (a gap of its own, not this test's subject).
          const change: SimChange = { ...c, equity: { timeMsc: ++now, balance: 1000, equity: 1000 } };
          // Some changes answer a request id (some ids again: the first answer is kept).
          if (id !== null) change.request = { requestId: `req-${id}`, timeMsc: now, result: { ok: false, reason: 'NO_MONEY', message: 'm', retcode: 10019 } };
          store.apply('S', '1', change);
          model.apply(change, now);
        };
        const pickOf = <T>(m: Map<number, T>, k: number) => [...m.keys()][k % m.size]!;
        for (const x of ops) {
          id = x.id;
          if (x.kind === 0 || (x.kind <= 2 && model.positions.size === 0)) apply({ positions: [position(++ticket, x.n)] });
          else if (x.kind === 1) apply({ positions: [position(pickOf(model.positions, x.pick), x.n)] });
          else if (x.kind === 2) apply({ closedPositions: [pickOf(model.positions, x.pick)] });
          else if (x.kind === 3 || (x.kind <= 5 && model.orders.size === 0)) apply({ orders: [{ order: order(++ticket, x.n, 'placed'), doneMs: null }] });
          else if (x.kind === 4) apply({ orders: [{ order: order(pickOf(model.orders, x.pick), x.n, 'placed'), doneMs: null }] });
          else if (x.kind === 5) {
            // A pending order filled as a position of the same ticket (in one change).
            const t = pickOf(model.orders, x.pick);
            apply({ orders: [{ order: order(t, x.n, 'filled'), doneMs: T0 + t }], positions: [position(t, x.n)] });
          } else if (x.kind === 6) {
            store.checkpoint();
            model.checkpoint();
            expect(rowsOf(db)).toEqual(model.rows);
          } else if (x.kind === 8) {
            // The checkpoint meets a full disk at one of its writes: rolled back, and the mirror as
            // before it (not poisoned): the next one writes what this one would have.
            failAt = 1 + (x.n % 6);
            let full = false;
            try {
              store.checkpoint();
            } catch (err) {
              expect((err as { code?: string }).code).toBe('SQLITE_FULL');
              full = true;
            }
            failAt = 0;
            if (!full) model.checkpoint();
            expect(rowsOf(db)).toEqual(model.rows);
          } else if (x.kind === 9) {
            // The account let go from memory (refused while it has changes not checkpointed), then
            // loaded again: the same open records in the same order, and its next checkpoint
            // writes what the mirror kept in memory would have.
            if (!store.release('S', '1')) {
              store.checkpoint();
              model.checkpoint();
              expect(store.release('S', '1')).toBe(true);
            }
            expect(store.loadedAccounts).toBe(0);
            const loaded = store.loadAccount('S', '1')!;
            model.restart();
            expect(loaded.positions).toEqual([...model.positions.values()]);
            expect(loaded.activeOrders).toEqual([...model.orders.values()]);
          } else {
            // A restart: the store reads its checkpoint and replays the journal after it.
            store.commitQueued();
            store = new SqliteSimStore(db, { groupCommit: false, checkpointMs: 1e12, fullDisk });
            const loaded = store.loadAccount('S', '1')!;
            model.restart();
            expect(loaded.positions).toEqual([...model.positions.values()]);
            expect(loaded.activeOrders).toEqual([...model.orders.values()]);
          }
        }
        store.checkpoint();
        model.checkpoint();
        expect(rowsOf(db)).toEqual(model.rows);
        db.close();
      }),
      { numRuns: 150 },
    );
  }, 60_000);
});
