// Persistence of simulator state: accounts, orders, open positions, deals, request ids,
// equity points, id counters. One transaction per trade (`apply`), prepared statements.
// Records are stored as JSON next to the few columns queries filter on.
import type Database from 'better-sqlite3';
import type { Deal, EquityPoint, Order, RequestLookup, Side } from '../broker/types.js';

export interface StoredAccount {
  readonly server: string;
  readonly login: string;
  /** sha256(salt + password), hex; the password itself is never stored. */
  readonly passwordHash: string;
  readonly salt: string;
  readonly name: string;
  readonly currency: string;
  readonly leverage: number;
  readonly createdMs: number;
  balance: number;
  credit: number;
}

/** An open position as stored; profit and swap are derived from the market. */
export interface StoredPosition {
  readonly ticket: number;
  readonly symbol: string;
  readonly type: Side;
  volume: number;
  readonly openPrice: number;
  readonly openTimeMsc: number;
  sl: number;
  tp: number;
  readonly magic: number;
  readonly comment: string;
  commission: number;
  /** Swap already realized by partial closes (subtracted from the accrued total). */
  swapPaid: number;
}

export interface SimChange {
  balance?: number;
  /** Upserts; doneMs = null while the order is active (pending or open P4 ticket).
   *  wasActive: the order was stored as active before (so it must leave that set). */
  orders?: { order: Order; doneMs: number | null; wasActive?: boolean }[];
  positions?: StoredPosition[];
  closedPositions?: number[];
  deals?: Deal[];
  request?: RequestLookup;
  equity?: EquityPoint;
}

export interface LoadedAccount {
  readonly account: StoredAccount;
  readonly positions: StoredPosition[];
  /** Active orders (pending, and open P4 tickets). */
  readonly activeOrders: Order[];
}

export interface SimPersistence {
  /** First id of a fresh block of `count` ids unique on this server (orders and deals). */
  allocateIds(server: string, count: number): number;
  loadAccount(server: string, login: string): LoadedAccount | null;
  createAccount(account: StoredAccount): void;
  apply(server: string, login: string, change: SimChange): void;
  deals(server: string, login: string, fromMs: number, toMs: number): Deal[];
  historyOrders(server: string, login: string, fromMs: number, toMs: number): Order[];
  equity(server: string, login: string, fromMs: number): EquityPoint[];
  request(server: string, login: string, requestId: string): RequestLookup | null;
  /** Resolves once everything applied so far is durable (group commit); replies to trades
   *  wait for it so nothing is acknowledged before it is on disk. */
  whenDurable(): Promise<void>;
}

/** DDL of the simulator tables; idempotent, callable from the gateway's migration runner.
 *  Commit cost on a WAL database is dominated by the number of distinct B-tree pages a
 *  commit rewrites, so the layout keeps a trade's writes on few pages even when many
 *  accounts trade at once:
 *  - sim_state: what an account has now (account row, open positions, active orders, and
 *    request ids), clustered by account, so one account's trade rewrites about one leaf;
 *  - sim_history: what happened (deals, finished orders, equity points), clustered by
 *    (server, time) so all accounts append to the same right-most leaf. Per-account history
 *    queries scan the time range and filter by login. */
export function migrateSimStore(db: Database.Database): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS sim_counters (server TEXT PRIMARY KEY, next INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS sim_state (
      server TEXT NOT NULL, login TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, login, kind, key)) WITHOUT ROWID;
    CREATE TABLE IF NOT EXISTS sim_history (
      server TEXT NOT NULL, time_ms INTEGER NOT NULL, login TEXT NOT NULL, kind TEXT NOT NULL, ticket INTEGER NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, time_ms, login, kind, ticket)) WITHOUT ROWID;
  `);
}

// sim_state kinds
const ACCOUNT = 'A';
const POSITION = 'P';
const ACTIVE_ORDER = 'O';
const REQUEST = 'R';
// sim_history kinds
const DEAL = 'D';
const DONE_ORDER = 'O';
const EQUITY = 'E';

export class SqliteSimStore implements SimPersistence {
  private readonly st;
  private readonly applyTx: (server: string, login: string, change: SimChange) => void;
  private readonly allocTx: Database.Transaction<(server: string, count: number) => number>;
  /** Account rows by key, so a balance change rewrites the row without reading it. */
  private readonly accounts = new Map<string, StoredAccount>();
  // Group commit: changes applied during one event-loop turn are committed together in one
  // transaction (a commit costs ~80 us on a virtual disk whatever its size). Readers flush
  // first, so reads always see every applied change.
  private readonly groupCommit: boolean;
  private queue: { server: string; login: string; change: SimChange }[] = [];
  private durable: Promise<void> | null = null;
  private resolveDurable: (() => void) | null = null;
  private rejectDurable: ((e: unknown) => void) | null = null;
  private readonly batchTx: (items: { server: string; login: string; change: SimChange }[]) => void;

  constructor(db: Database.Database, options: { groupCommit?: boolean } = {}) {
    this.groupCommit = options.groupCommit ?? true;
    migrateSimStore(db);
    const p = (sql: string) => db.prepare(sql);
    this.st = {
      counterGet: p('SELECT next FROM sim_counters WHERE server = ?'),
      counterSet: p('INSERT INTO sim_counters (server, next) VALUES (?, ?) ON CONFLICT(server) DO UPDATE SET next = excluded.next'),
      stateUpsert: p('INSERT OR REPLACE INTO sim_state (server, login, kind, key, data) VALUES (?, ?, ?, ?, ?)'),
      stateInsert: p('INSERT INTO sim_state (server, login, kind, key, data) VALUES (?, ?, ?, ?, ?)'),
      stateInsertIgnore: p('INSERT OR IGNORE INTO sim_state (server, login, kind, key, data) VALUES (?, ?, ?, ?, ?)'),
      stateDelete: p('DELETE FROM sim_state WHERE server = ? AND login = ? AND kind = ? AND key = ?'),
      stateGet: p('SELECT data FROM sim_state WHERE server = ? AND login = ? AND kind = ? AND key = ?'),
      stateList: p("SELECT kind, data FROM sim_state WHERE server = ? AND login = ? AND kind IN ('A', 'P', 'O')"),
      histInsert: p('INSERT OR REPLACE INTO sim_history (server, time_ms, login, kind, ticket, data) VALUES (?, ?, ?, ?, ?, ?)'),
      histRange: p('SELECT data FROM sim_history WHERE server = ? AND time_ms >= ? AND time_ms < ? AND login = ? AND kind = ? ORDER BY time_ms, ticket'),
      equityFrom: p("SELECT time_ms, data FROM sim_history WHERE server = ? AND time_ms >= ? AND login = ? AND kind = 'E' ORDER BY time_ms"),
    };
    const st = this.st;
    this.applyTx = db.transaction((server: string, login: string, c: SimChange) => {
      if (c.balance !== undefined) {
        const acc = this.accounts.get(`${server}\u0000${login}`);
        if (!acc) throw new Error(`account ${server}/${login} not loaded`);
        acc.balance = c.balance;
        st.stateUpsert.run(server, login, ACCOUNT, '', JSON.stringify(acc));
      }
      if (c.orders) {
        for (const o of c.orders) {
          const t = o.order.ticket;
          if (o.doneMs === null) {
            st.stateUpsert.run(server, login, ACTIVE_ORDER, ticketKey(t), JSON.stringify(o.order));
          } else {
            if (o.wasActive !== false) st.stateDelete.run(server, login, ACTIVE_ORDER, ticketKey(t));
            st.histInsert.run(server, o.doneMs, login, DONE_ORDER, t, JSON.stringify(o.order));
          }
        }
      }
      if (c.positions) for (const pos of c.positions) st.stateUpsert.run(server, login, POSITION, ticketKey(pos.ticket), JSON.stringify(pos));
      if (c.closedPositions) for (const t of c.closedPositions) st.stateDelete.run(server, login, POSITION, ticketKey(t));
      if (c.deals) for (const d of c.deals) st.histInsert.run(server, d.timeMsc, login, DEAL, d.ticket, JSON.stringify(d));
      if (c.request) st.stateInsertIgnore.run(server, login, REQUEST, c.request.requestId, JSON.stringify(c.request));
      if (c.equity) st.histInsert.run(server, c.equity.timeMsc, login, EQUITY, 0, JSON.stringify([c.equity.balance, c.equity.equity]));
    });
    this.batchTx = db.transaction((items: { server: string; login: string; change: SimChange }[]) => {
      for (const it of items) this.applyTx(it.server, it.login, it.change);
    });
    this.allocTx = db.transaction((server: string, count: number) => {
      const row = st.counterGet.get(server) as { next: number } | undefined;
      const first = row?.next ?? 100_001;
      st.counterSet.run(server, first + count);
      return first;
    });
  }

  /** Pragmas for a file database: WAL, synchronous=NORMAL (durable across process crashes). */
  static configure(db: Database.Database): void {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // Fewer, larger checkpoints: each one fsyncs, which dominates the trade path otherwise.
    db.pragma('wal_autocheckpoint = 4000');
  }

  allocateIds(server: string, count: number): number {
    return this.allocTx.immediate(server, count);
  }

  loadAccount(server: string, login: string): LoadedAccount | null {
    this.commitQueued();
    const rows = this.st.stateList.all(server, login) as { kind: string; data: string }[];
    let account: StoredAccount | null = null;
    const positions: StoredPosition[] = [];
    const activeOrders: Order[] = [];
    for (const r of rows) {
      if (r.kind === ACCOUNT) account = JSON.parse(r.data) as StoredAccount;
      else if (r.kind === POSITION) positions.push(JSON.parse(r.data) as StoredPosition);
      else if (r.kind === ACTIVE_ORDER) activeOrders.push(JSON.parse(r.data) as Order);
    }
    if (!account) return null;
    this.accounts.set(`${server}\u0000${login}`, { ...account });
    return { account, positions, activeOrders };
  }

  createAccount(a: StoredAccount): void {
    this.st.stateInsert.run(a.server, a.login, ACCOUNT, '', JSON.stringify(a));
    this.accounts.set(`${a.server}\u0000${a.login}`, { ...a });
  }

  apply(server: string, login: string, change: SimChange): void {
    if (!this.groupCommit) {
      this.applyTx(server, login, change);
      return;
    }
    this.queue.push({ server, login, change });
    if (this.durable === null) {
      this.durable = new Promise<void>((resolve, reject) => {
        this.resolveDurable = resolve;
        this.rejectDurable = reject;
      });
      setImmediate(() => this.commitQueued());
    }
  }

  /** Commit what is queued now (also called by readers). */
  commitQueued(): void {
    if (this.queue.length === 0) return;
    const items = this.queue;
    const resolve = this.resolveDurable;
    const reject = this.rejectDurable;
    this.queue = [];
    this.durable = this.resolveDurable = this.rejectDurable = null;
    try {
      this.batchTx(items);
      resolve?.();
    } catch (err) {
      reject?.(err);
      throw err;
    }
  }

  whenDurable(): Promise<void> {
    return this.durable ?? Promise.resolve();
  }

  deals(server: string, login: string, fromMs: number, toMs: number): Deal[] {
    this.commitQueued();
    return (this.st.histRange.all(server, fromMs, toMs, login, DEAL) as { data: string }[]).map((r) => JSON.parse(r.data) as Deal);
  }
  historyOrders(server: string, login: string, fromMs: number, toMs: number): Order[] {
    this.commitQueued();
    return (this.st.histRange.all(server, fromMs, toMs, login, DONE_ORDER) as { data: string }[]).map((r) => JSON.parse(r.data) as Order);
  }
  equity(server: string, login: string, fromMs: number): EquityPoint[] {
    this.commitQueued();
    return (this.st.equityFrom.all(server, fromMs, login) as { time_ms: number; data: string }[]).map((r) => {
      const [balance, equity] = JSON.parse(r.data) as [number, number];
      return { timeMsc: r.time_ms, balance, equity };
    });
  }
  request(server: string, login: string, requestId: string): RequestLookup | null {
    // Checked on every trade with an id, so it must not force the group commit: look in the
    // queue first (newest wins, like the table's INSERT OR IGNORE keeps the first).
    for (const it of this.queue) {
      const r = it.change.request;
      if (r && r.requestId === requestId && it.server === server && it.login === login) return r;
    }
    const row = this.st.stateGet.get(server, login, REQUEST, requestId) as { data: string } | undefined;
    return row ? (JSON.parse(row.data) as RequestLookup) : null;
  }
}

/** Same contract, in memory, for pure tests and benchmarks without I/O. Records are copied
 *  in and out so callers cannot alias stored state (as with SQLite). */
export class MemorySimStore implements SimPersistence {
  private readonly counters = new Map<string, number>();
  private readonly accounts = new Map<string, { account: StoredAccount; positions: Map<number, StoredPosition>; orders: Map<number, { order: Order; doneMs: number | null }>; deals: Deal[]; requests: Map<string, RequestLookup>; equity: EquityPoint[] }>();

  whenDurable(): Promise<void> {
    return Promise.resolve();
  }
  allocateIds(server: string, count: number): number {
    const first = this.counters.get(server) ?? 100_001;
    this.counters.set(server, first + count);
    return first;
  }
  private acct(server: string, login: string) {
    const a = this.accounts.get(`${server}\u0000${login}`);
    if (!a) throw new Error(`unknown simulator account ${server}/${login}`);
    return a;
  }
  loadAccount(server: string, login: string): LoadedAccount | null {
    const a = this.accounts.get(`${server}\u0000${login}`);
    if (!a) return null;
    return {
      account: clone(a.account),
      positions: [...a.positions.values()].map(clone),
      activeOrders: [...a.orders.values()].filter((o) => o.doneMs === null).map((o) => clone(o.order)),
    };
  }
  createAccount(account: StoredAccount): void {
    this.accounts.set(`${account.server}\u0000${account.login}`, {
      account: clone(account),
      positions: new Map(),
      orders: new Map(),
      deals: [],
      requests: new Map(),
      equity: [],
    });
  }
  apply(server: string, login: string, c: SimChange): void {
    const a = this.acct(server, login);
    if (c.balance !== undefined) a.account.balance = c.balance;
    if (c.orders) for (const o of c.orders) a.orders.set(o.order.ticket, { order: clone(o.order), doneMs: o.doneMs });
    if (c.positions) for (const p of c.positions) a.positions.set(p.ticket, clone(p));
    if (c.closedPositions) for (const t of c.closedPositions) a.positions.delete(t);
    if (c.deals) for (const d of c.deals) a.deals.push(clone(d));
    if (c.request && !a.requests.has(c.request.requestId)) a.requests.set(c.request.requestId, clone(c.request));
    if (c.equity) a.equity.push({ ...c.equity });
  }
  deals(server: string, login: string, fromMs: number, toMs: number): Deal[] {
    return this.acct(server, login)
      .deals.filter((d) => d.timeMsc >= fromMs && d.timeMsc < toMs)
      .sort((x, y) => x.timeMsc - y.timeMsc || x.ticket - y.ticket)
      .map(clone);
  }
  historyOrders(server: string, login: string, fromMs: number, toMs: number): Order[] {
    return [...this.acct(server, login).orders.values()]
      .filter((o) => o.doneMs !== null && o.doneMs >= fromMs && o.doneMs < toMs)
      .sort((x, y) => x.doneMs! - y.doneMs! || x.order.ticket - y.order.ticket)
      .map((o) => clone(o.order));
  }
  equity(server: string, login: string, fromMs: number): EquityPoint[] {
    return this.acct(server, login).equity.filter((e) => e.timeMsc >= fromMs).map((e) => ({ ...e }));
  }
  request(server: string, login: string, requestId: string): RequestLookup | null {
    const r = this.acct(server, login).requests.get(requestId);
    return r ? clone(r) : null;
  }
}

/** Zero-padded so text keys sort like the numbers. */
function ticketKey(ticket: number): string {
  return String(ticket).padStart(12, '0');
}

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}
