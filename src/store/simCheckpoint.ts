// Checkpoints of simulated accounts in sim_state (see simStore.ts for when they are written).
//
// Version 2 (this file writes it): the account row ('A', key '') holds the account, the last
// journal seq and time; each open position is a row of its own ('P') and so is each active order
// ('O'), keyed by a per-account counter in the order they entered the account (the engine's maps
// iterate in that order, and stop-out, stops and fills visit them so: a restart must not reorder
// them). A checkpoint writes only the rows whose record changed since the last one and deletes
// those that left: an order at 100 open positions wrote the 100 of them once a second, ~90 us of
// the shard's thread; now the one that changed.
// Version 1 (still read): one 'A' row with the positions and active orders inline. Its account is
// rewritten as version 2 at its next checkpoint (all its rows, in one transaction with the 'A' row).
import type Database from 'better-sqlite3';
import type { Order } from '../market/orders.js';
import type { StoredAccount, StoredPosition } from '../sim/persistence.js';

export const CHECKPOINT = 'A';
const POSITION = 'P';
const ORDER = 'O';

/** What a row holds now (the mirror replaces a record's object whenever it changes) and its key. */
interface Written<T> {
  rec: T;
  readonly key: string;
}

/** The rows of one account's last checkpoint; created with its first position or order. */
export interface CheckpointRows {
  readonly positions: Map<number, Written<StoredPosition>>;
  readonly orders: Map<number, Written<Order>>;
  /** Last key counter used. */
  next: number;
}

/** The part of an account's in-memory mirror a checkpoint writes. */
export interface CheckpointState {
  account: StoredAccount;
  positions: Map<number, StoredPosition> | undefined;
  activeOrders: Map<number, Order> | undefined;
  seq: number;
  lastTimeMs: number;
  rows?: CheckpointRows | undefined;
}

interface AccountRow {
  v?: 2;
  account: StoredAccount;
  seq: number;
  lastTimeMs: number;
  /** Version 1 only. */
  positions?: StoredPosition[];
  activeOrders?: Order[];
}

const rowKey = (n: number) => String(n).padStart(12, '0');

export class CheckpointRowStore {
  private readonly st;

  constructor(db: Database.Database) {
    const p = (sql: string) => db.prepare(sql);
    this.st = {
      upsert: p('INSERT OR REPLACE INTO sim_state (server, login, kind, key, data) VALUES (?, ?, ?, ?, ?)'),
      remove: p('DELETE FROM sim_state WHERE server = ? AND login = ? AND kind = ? AND key = ?'),
      rows: p('SELECT key, data FROM sim_state WHERE server = ? AND login = ? AND kind = ? ORDER BY key'),
    };
  }

  /** Write an account's checkpoint (inside the caller's transaction): its row, and the rows of
   *  the positions and orders that changed or left since the last one. */
  write(m: CheckpointState): void {
    const a = m.account;
    if (m.positions?.size || m.activeOrders?.size || m.rows) {
      const rows = (m.rows ??= { positions: new Map(), orders: new Map(), next: 0 });
      this.sync(a, POSITION, m.positions, rows.positions, rows);
      this.sync(a, ORDER, m.activeOrders, rows.orders, rows);
    }
    const row: AccountRow = { v: 2, account: a, seq: m.seq, lastTimeMs: m.lastTimeMs };
    this.st.upsert.run(a.server, a.login, CHECKPOINT, '', JSON.stringify(row));
  }

  private sync<T>(a: StoredAccount, kind: string, current: Map<number, T> | undefined, written: Map<number, Written<T>>, rows: CheckpointRows): void {
    if (current) {
      for (const [ticket, rec] of current) {
        let w = written.get(ticket);
        if (w?.rec === rec) continue;
        if (w) w.rec = rec;
        else written.set(ticket, (w = { rec, key: rowKey(++rows.next) }));
        this.st.upsert.run(a.server, a.login, kind, w.key, JSON.stringify(rec));
      }
    }
    // Every current ticket is in `written` now: more there means some left.
    if (written.size > (current?.size ?? 0)) {
      for (const [ticket, w] of written) {
        if (current?.has(ticket)) continue;
        this.st.remove.run(a.server, a.login, kind, w.key);
        written.delete(ticket);
      }
    }
  }

  /** An account's state from its checkpoint row (either version) and, for version 2, its rows. */
  read(server: string, login: string, data: string): CheckpointState {
    const cp = JSON.parse(data) as AccountRow;
    const state: CheckpointState = { account: cp.account, positions: undefined, activeOrders: undefined, seq: cp.seq, lastTimeMs: cp.lastTimeMs };
    if (cp.v === undefined) {
      // Version 1: no rows written yet; the next checkpoint writes them all.
      if (cp.positions?.length) state.positions = new Map(cp.positions.map((p) => [p.ticket, p]));
      if (cp.activeOrders?.length) state.activeOrders = new Map(cp.activeOrders.map((o) => [o.ticket, o]));
      return state;
    }
    const rows: CheckpointRows = { positions: new Map(), orders: new Map(), next: 0 };
    const load = <T extends { ticket: number }>(kind: string, written: Map<number, Written<T>>): Map<number, T> | undefined => {
      const list = this.st.rows.all(server, login, kind) as { key: string; data: string }[];
      if (list.length === 0) return undefined;
      const out = new Map<number, T>();
      for (const r of list) {
        const rec = JSON.parse(r.data) as T;
        out.set(rec.ticket, rec);
        written.set(rec.ticket, { rec, key: r.key });
        rows.next = Math.max(rows.next, Number(r.key));
      }
      return out;
    };
    state.positions = load(POSITION, rows.positions);
    state.activeOrders = load(ORDER, rows.orders);
    if (rows.next > 0) state.rows = rows;
    return state;
  }
}
