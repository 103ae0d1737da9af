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
  /** Upserts; doneMs = null while the order is active (pending or open P4 ticket). */
  orders?: { order: Order; doneMs: number | null }[];
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
  /** All deals after a deal ticket (bridge resync). */
  dealsAfter(server: string, login: string, afterTicket: number): Deal[];
}

/** DDL of the simulator tables; idempotent, callable from the gateway's migration runner. */
export function migrateSimStore(db: Database.Database): void {
  db.exec(`
    CREATE TABLE IF NOT EXISTS sim_counters (server TEXT PRIMARY KEY, next INTEGER NOT NULL);
    CREATE TABLE IF NOT EXISTS sim_accounts (
      server TEXT NOT NULL, login TEXT NOT NULL, data TEXT NOT NULL, balance REAL NOT NULL,
      PRIMARY KEY (server, login));
    CREATE TABLE IF NOT EXISTS sim_orders (
      server TEXT NOT NULL, login TEXT NOT NULL, ticket INTEGER NOT NULL, done_ms INTEGER, data TEXT NOT NULL,
      PRIMARY KEY (server, ticket));
    CREATE INDEX IF NOT EXISTS sim_orders_acct ON sim_orders (server, login, done_ms);
    CREATE TABLE IF NOT EXISTS sim_positions (
      server TEXT NOT NULL, login TEXT NOT NULL, ticket INTEGER NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, ticket));
    CREATE INDEX IF NOT EXISTS sim_positions_acct ON sim_positions (server, login);
    CREATE TABLE IF NOT EXISTS sim_deals (
      server TEXT NOT NULL, login TEXT NOT NULL, ticket INTEGER NOT NULL, time_ms INTEGER NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, ticket));
    CREATE INDEX IF NOT EXISTS sim_deals_acct ON sim_deals (server, login, time_ms);
    CREATE TABLE IF NOT EXISTS sim_requests (
      server TEXT NOT NULL, login TEXT NOT NULL, request_id TEXT NOT NULL, data TEXT NOT NULL,
      PRIMARY KEY (server, login, request_id));
    CREATE TABLE IF NOT EXISTS sim_equity (
      server TEXT NOT NULL, login TEXT NOT NULL, time_ms INTEGER NOT NULL, balance REAL NOT NULL, equity REAL NOT NULL);
    CREATE INDEX IF NOT EXISTS sim_equity_acct ON sim_equity (server, login, time_ms);
  `);
}

export class SqliteSimStore implements SimPersistence {
  private readonly st;
  private readonly applyTx: (server: string, login: string, change: SimChange) => void;
  private readonly allocTx: Database.Transaction<(server: string, count: number) => number>;

  constructor(db: Database.Database) {
    migrateSimStore(db);
    const p = (sql: string) => db.prepare(sql);
    this.st = {
      counterGet: p('SELECT next FROM sim_counters WHERE server = ?'),
      counterSet: p('INSERT INTO sim_counters (server, next) VALUES (?, ?) ON CONFLICT(server) DO UPDATE SET next = excluded.next'),
      accountGet: p('SELECT data, balance FROM sim_accounts WHERE server = ? AND login = ?'),
      accountInsert: p('INSERT INTO sim_accounts (server, login, data, balance) VALUES (?, ?, ?, ?)'),
      balanceSet: p('UPDATE sim_accounts SET balance = ? WHERE server = ? AND login = ?'),
      orderUpsert: p(
        'INSERT INTO sim_orders (server, login, ticket, done_ms, data) VALUES (?, ?, ?, ?, ?) ON CONFLICT(server, ticket) DO UPDATE SET done_ms = excluded.done_ms, data = excluded.data',
      ),
      ordersActive: p('SELECT data FROM sim_orders WHERE server = ? AND login = ? AND done_ms IS NULL ORDER BY ticket'),
      ordersDone: p('SELECT data FROM sim_orders WHERE server = ? AND login = ? AND done_ms >= ? AND done_ms < ? ORDER BY done_ms, ticket'),
      posUpsert: p(
        'INSERT INTO sim_positions (server, login, ticket, data) VALUES (?, ?, ?, ?) ON CONFLICT(server, ticket) DO UPDATE SET data = excluded.data',
      ),
      posDelete: p('DELETE FROM sim_positions WHERE server = ? AND ticket = ?'),
      posList: p('SELECT data FROM sim_positions WHERE server = ? AND login = ? ORDER BY ticket'),
      dealInsert: p('INSERT INTO sim_deals (server, login, ticket, time_ms, data) VALUES (?, ?, ?, ?, ?)'),
      dealsRange: p('SELECT data FROM sim_deals WHERE server = ? AND login = ? AND time_ms >= ? AND time_ms < ? ORDER BY time_ms, ticket'),
      dealsAfter: p('SELECT data FROM sim_deals WHERE server = ? AND login = ? AND ticket > ? ORDER BY ticket'),
      requestInsert: p('INSERT OR IGNORE INTO sim_requests (server, login, request_id, data) VALUES (?, ?, ?, ?)'),
      requestGet: p('SELECT data FROM sim_requests WHERE server = ? AND login = ? AND request_id = ?'),
      equityInsert: p('INSERT INTO sim_equity (server, login, time_ms, balance, equity) VALUES (?, ?, ?, ?, ?)'),
      equityFrom: p(
        'SELECT time_ms AS timeMsc, balance, equity FROM sim_equity WHERE server = ? AND login = ? AND time_ms >= ? ORDER BY time_ms, rowid',
      ),
    };
    const st = this.st;
    this.applyTx = db.transaction((server: string, login: string, c: SimChange) => {
      if (c.balance !== undefined) st.balanceSet.run(c.balance, server, login);
      if (c.orders) for (const o of c.orders) st.orderUpsert.run(server, login, o.order.ticket, o.doneMs, JSON.stringify(o.order));
      if (c.positions) for (const pos of c.positions) st.posUpsert.run(server, login, pos.ticket, JSON.stringify(pos));
      if (c.closedPositions) for (const t of c.closedPositions) st.posDelete.run(server, t);
      if (c.deals) for (const d of c.deals) st.dealInsert.run(server, login, d.ticket, d.timeMsc, JSON.stringify(d));
      if (c.request) st.requestInsert.run(server, login, c.request.requestId, JSON.stringify(c.request));
      if (c.equity) st.equityInsert.run(server, login, c.equity.timeMsc, c.equity.balance, c.equity.equity);
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
  }

  allocateIds(server: string, count: number): number {
    return this.allocTx.immediate(server, count);
  }

  loadAccount(server: string, login: string): LoadedAccount | null {
    const row = this.st.accountGet.get(server, login) as { data: string; balance: number } | undefined;
    if (!row) return null;
    const account = { ...(JSON.parse(row.data) as StoredAccount), balance: row.balance };
    const positions = (this.st.posList.all(server, login) as { data: string }[]).map((r) => JSON.parse(r.data) as StoredPosition);
    const activeOrders = (this.st.ordersActive.all(server, login) as { data: string }[]).map((r) => JSON.parse(r.data) as Order);
    return { account, positions, activeOrders };
  }

  createAccount(a: StoredAccount): void {
    this.st.accountInsert.run(a.server, a.login, JSON.stringify(a), a.balance);
  }

  apply(server: string, login: string, change: SimChange): void {
    this.applyTx(server, login, change);
  }

  deals(server: string, login: string, fromMs: number, toMs: number): Deal[] {
    return (this.st.dealsRange.all(server, login, fromMs, toMs) as { data: string }[]).map((r) => JSON.parse(r.data) as Deal);
  }
  dealsAfter(server: string, login: string, afterTicket: number): Deal[] {
    return (this.st.dealsAfter.all(server, login, afterTicket) as { data: string }[]).map((r) => JSON.parse(r.data) as Deal);
  }
  historyOrders(server: string, login: string, fromMs: number, toMs: number): Order[] {
    return (this.st.ordersDone.all(server, login, fromMs, toMs) as { data: string }[]).map((r) => JSON.parse(r.data) as Order);
  }
  equity(server: string, login: string, fromMs: number): EquityPoint[] {
    return this.st.equityFrom.all(server, login, fromMs) as EquityPoint[];
  }
  request(server: string, login: string, requestId: string): RequestLookup | null {
    const row = this.st.requestGet.get(server, login, requestId) as { data: string } | undefined;
    return row ? (JSON.parse(row.data) as RequestLookup) : null;
  }
}

/** Same contract, in memory, for pure tests and benchmarks without I/O. Records are copied
 *  in and out so callers cannot alias stored state (as with SQLite). */
export class MemorySimStore implements SimPersistence {
  private readonly counters = new Map<string, number>();
  private readonly accounts = new Map<string, { account: StoredAccount; positions: Map<number, StoredPosition>; orders: Map<number, { order: Order; doneMs: number | null }>; deals: Deal[]; requests: Map<string, RequestLookup>; equity: EquityPoint[] }>();

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
  dealsAfter(server: string, login: string, afterTicket: number): Deal[] {
    return this.acct(server, login).deals.filter((d) => d.ticket > afterTicket).sort((x, y) => x.ticket - y.ticket).map(clone);
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

function clone<T>(v: T): T {
  return structuredClone(v);
}
