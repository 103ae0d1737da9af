// The simulator's persistence port (src/sim/persistence.ts) in memory, for pure tests and
// benchmarks without I/O, and for a simulator process started without a database.
import type { EquityPoint } from '../market/account.js';
import type { Deal, Order, RequestLookup } from '../market/orders.js';
import type { LoadedAccount, SimChange, SimPersistence, StoredAccount, StoredPosition } from '../sim/persistence.js';
/** Same contract, in memory, for pure tests and benchmarks without I/O. Records are copied
 *  in and out so callers cannot alias stored state (as with SQLite). */
export class MemorySimStore implements SimPersistence {
  private readonly counters = new Map<string, number>();
  private readonly accounts = new Map<string, { account: StoredAccount; positions: Map<number, StoredPosition>; orders: Map<number, { order: Order; doneMs: number | null }>; deals: Deal[]; requests: Map<string, RequestLookup>; equity: EquityPoint[] }>();

  whenDurable(): Promise<void> {
    return Promise.resolve();
  }
  flush(): void {}
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
    let lastTicket = 0;
    for (const t of [...a.deals.map((d) => d.ticket), ...a.orders.keys(), ...a.positions.keys()]) lastTicket = Math.max(lastTicket, t);
    return {
      account: clone(a.account),
      positions: [...a.positions.values()].map(clone),
      activeOrders: [...a.orders.values()].filter((o) => o.doneMs === null).map((o) => clone(o.order)),
      lastTicket,
    };
  }
  /** Its records are the store itself: an account's engine may always be let go (loadAccount again). */
  release(): boolean {
    return true;
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

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}
