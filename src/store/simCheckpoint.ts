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
import type { SimChange, StoredAccount, StoredPosition } from '../sim/persistence.js';
import { JsonText } from '../util/jsonText.js';

export const CHECKPOINT = 'A';
const POSITION = 'P';
const ORDER = 'O';

/** The rows of one account's last checkpoint: each record's row key (its counter, written as
 *  rowKey) by ticket. A number per entry, not a record and its key string: these live as long as
 *  the position, and every young-generation scavenge copies what survives (issue 19). */
export interface CheckpointRows {
  readonly positions: Map<number, number>;
  readonly orders: Map<number, number>;
  /** Last key counter used. */
  next: number;
}

/** A record changed since the last checkpoint, or null: it left (and has a row to delete). */
export type Pending<T> = Map<number, T | null>;

/** The part of an account's in-memory mirror a checkpoint writes: what changed since the last one
 *  (in the order the records first changed) and the rows written so far. The records themselves
 *  are not kept once written: the engine holds them, and a restart reads them from the rows. */
export interface CheckpointState {
  account: StoredAccount;
  positions: Pending<StoredPosition> | undefined;
  activeOrders: Pending<Order> | undefined;
  seq: number;
  lastTimeMs: number;
  /** The highest ticket of the account's records so far (at least): a simulator loading it issues
   *  its next ids above it (LoadedAccount.lastTicket). */
  lastTicket: number;
  rows?: CheckpointRows | undefined;
}

/** A checkpoint as read: its state (nothing pending for version 2; everything for version 1, which
 *  has no rows yet) and the open records it holds, in the engine's order. */
export interface ReadCheckpoint {
  state: CheckpointState;
  /** The row's lastTicket; undefined: written before it was kept (state.lastTicket is 0 then). */
  lastTicket: number | undefined;
  positions: Map<number, StoredPosition>;
  activeOrders: Map<number, Order>;
}

/** A change's positions and orders noted as pending; `open`: an account being loaded, its open
 *  records (kept up to date too). The change's records are kept as they are: the engine never
 *  changes them afterwards (SimPersistence.apply). */
export function notePending(m: CheckpointState, c: SimChange, open?: ReadCheckpoint): void {
  if (c.deals) for (const d of c.deals) if (d.ticket > m.lastTicket) m.lastTicket = d.ticket;
  if (c.orders) {
    for (const { order, doneMs } of c.orders) {
      if (order.ticket > m.lastTicket) m.lastTicket = order.ticket;
      if (doneMs === null) {
        m.activeOrders = noteChanged(m.activeOrders, order.ticket, order);
        open?.activeOrders.set(order.ticket, order);
      } else {
        m.activeOrders = noteLeft(m.activeOrders, m.rows?.orders, order.ticket);
        open?.activeOrders.delete(order.ticket);
      }
    }
  }
  if (c.positions) {
    for (const p of c.positions) {
      if (p.ticket > m.lastTicket) m.lastTicket = p.ticket;
      m.positions = noteChanged(m.positions, p.ticket, p);
      open?.positions.set(p.ticket, p);
    }
  }
  if (c.closedPositions) {
    for (const t of c.closedPositions) {
      m.positions = noteLeft(m.positions, m.rows?.positions, t);
      open?.positions.delete(t);
    }
  }
}

/** Note a change of an account's record in its pending map (created by its first entry). */
function noteChanged<T>(pending: Pending<T> | undefined, ticket: number, rec: T): Pending<T> {
  return (pending ?? new Map<number, T | null>()).set(ticket, rec);
}

/** Note that a record left: its row goes at the next checkpoint, if it has one. */
function noteLeft<T>(pending: Pending<T> | undefined, written: Map<number, number> | undefined, ticket: number): Pending<T> | undefined {
  if (written?.has(ticket)) return (pending ?? new Map<number, T | null>()).set(ticket, null);
  pending?.delete(ticket);
  return pending;
}

interface AccountRow {
  v?: 2;
  account: StoredAccount;
  seq: number;
  lastTimeMs: number;
  /** Absent from rows written before it was kept. */
  lastTicket?: number;
  /** Version 1 only. */
  positions?: StoredPosition[];
  activeOrders?: Order[];
}

const rowKey = (n: number) => String(n).padStart(12, '0');

/** What a checkpoint's write took from its mirror: the records it wrote, and the rows' key counter
 *  before it (undefined: the mirror had no rows yet). */
export interface CheckpointWrite {
  positions: Pending<StoredPosition> | undefined;
  activeOrders: Pending<Order> | undefined;
  next: number | undefined;
}

/** Forget the row keys of the records that left (null in `pending`). */
function forgetLeft<T>(pending: Pending<T>, written: Map<number, number>): void {
  for (const [ticket, rec] of pending) if (rec === null) written.delete(ticket);
}

/** The checkpoint rows' writer: one record at a time. */
const rowText = new JsonText();
/** JSON.stringify(rec), written into a reused buffer (src/util/jsonText.ts): a position's row at
 *  every order cost ~0.3 KB of young garbage in the stringifier's parts and their flattening. */
function recordJson(rec: object): string {
  const w = rowText.begin().obj(rec);
  return w.failed ? JSON.stringify(rec) : w.text();
}

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
   *  the positions and orders that changed or left since the last one. The pending records are
   *  taken from the mirror; what the write changed in it is returned, for `committed` once the
   *  transaction commits, or `undo` if it fails (a full disk: the pass is tried again later). */
  write(m: CheckpointState): CheckpointWrite {
    const a = m.account;
    const w: CheckpointWrite = { positions: m.positions, activeOrders: m.activeOrders, next: m.rows?.next };
    try {
      if (m.positions?.size || m.activeOrders?.size) {
        const rows = (m.rows ??= { positions: new Map(), orders: new Map(), next: 0 });
        if (m.positions) this.sync(a, POSITION, m.positions, rows.positions, rows);
        if (m.activeOrders) this.sync(a, ORDER, m.activeOrders, rows.orders, rows);
        m.positions = m.activeOrders = undefined;
      }
      const row: AccountRow = { v: 2, account: a, seq: m.seq, lastTimeMs: m.lastTimeMs, lastTicket: m.lastTicket };
      this.st.upsert.run(a.server, a.login, CHECKPOINT, '', JSON.stringify(row));
    } catch (err) {
      this.undo(m, w); // its caller never saw this write
      throw err;
    }
    return w;
  }

  /** The checkpoint's transaction committed: the records that left have no row any more. */
  committed(m: CheckpointState, w: CheckpointWrite): void {
    if (!m.rows) return;
    if (w.positions) forgetLeft(w.positions, m.rows.positions);
    if (w.activeOrders) forgetLeft(w.activeOrders, m.rows.orders);
  }

  /** The checkpoint's transaction failed (rolled back): the mirror as it was before `write`, its
   *  records pending again (none changed meanwhile: nothing runs between the two). */
  undo(m: CheckpointState, w: CheckpointWrite): void {
    m.positions = w.positions;
    m.activeOrders = w.activeOrders;
    if (w.next === undefined) {
      m.rows = undefined; // created by this write
    } else if (m.rows) {
      // Keys are handed out in order: those past `next` were given by this write.
      for (const [pending, written] of [[w.positions, m.rows.positions], [w.activeOrders, m.rows.orders]] as const) {
        if (pending) for (const t of pending.keys()) if (written.get(t)! > w.next) written.delete(t);
      }
      m.rows.next = w.next;
    }
  }

  private sync<T>(a: StoredAccount, kind: string, pending: Pending<T>, written: Map<number, number>, rows: CheckpointRows): void {
    for (const [ticket, rec] of pending) {
      const key = written.get(ticket);
      if (rec === null) {
        // Its key is forgotten once this commits (`committed`).
        if (key !== undefined) this.st.remove.run(a.server, a.login, kind, rowKey(key));
        continue;
      }
      let k = key;
      if (k === undefined) written.set(ticket, (k = ++rows.next));
      this.st.upsert.run(a.server, a.login, kind, rowKey(k), recordJson(rec as object));
    }
  }

  /** An account's checkpoint from its row (either version) and, for version 2, its rows. */
  read(server: string, login: string, data: string): ReadCheckpoint {
    const cp = JSON.parse(data) as AccountRow;
    const state: CheckpointState = { account: cp.account, positions: undefined, activeOrders: undefined, seq: cp.seq, lastTimeMs: cp.lastTimeMs, lastTicket: cp.lastTicket ?? 0 };
    const lastTicket = cp.lastTicket;
    if (cp.v === undefined) {
      // Version 1: no rows written yet; the next checkpoint writes them all.
      const positions = new Map((cp.positions ?? []).map((p) => [p.ticket, p]));
      const activeOrders = new Map((cp.activeOrders ?? []).map((o) => [o.ticket, o]));
      if (positions.size) state.positions = new Map(positions);
      if (activeOrders.size) state.activeOrders = new Map(activeOrders);
      return { state, positions, activeOrders, lastTicket };
    }
    const rows: CheckpointRows = { positions: new Map(), orders: new Map(), next: 0 };
    const load = <T extends { ticket: number }>(kind: string, written: Map<number, number>): Map<number, T> => {
      const out = new Map<number, T>();
      for (const r of this.st.rows.all(server, login, kind) as { key: string; data: string }[]) {
        const rec = JSON.parse(r.data) as T;
        const key = Number(r.key);
        out.set(rec.ticket, rec);
        written.set(rec.ticket, key);
        rows.next = Math.max(rows.next, key);
      }
      return out;
    };
    const positions = load<StoredPosition>(POSITION, rows.positions);
    const activeOrders = load<Order>(ORDER, rows.orders);
    if (rows.next > 0) state.rows = rows;
    return { state, positions, activeOrders, lastTicket };
  }
}
