// In-process BrokerConnection over the simulator: one connection = one login on one server.
// Trades are idempotent per request id (the first outcome is replayed), faults from the
// simulator's FaultController are applied here, at the edge, like a network would.
import { BrokerListeners } from './listeners.js';
import type { SimAccount } from '../sim/account.js';
import { marginFor } from '../sim/accounting.js';
import { Simulator, type AccountSink, type Clock, type SimServer } from '../sim/simulator.js';
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import { DEFAULT_CONFIG_PATH, loadReplayData, loadSimConfig } from '../sim/config.js';
import { SqliteSimStore } from '../store/simStore.js';
import { MemorySimStore } from '../store/memorySimStore.js';
import type { CommitGroup } from '../store/commitGroup.js';
import { utcOffsetMinutes } from '../market/serverClock.js';
import { dialectOf } from './dialect.js';
import {
  passwordOf, type BrokerConnection, type BrokerConnectionFactory, type BrokerCredentials, type BrokerEventName, type BrokerEvents,
  type ConnectionState, type TradeOptions, type Unsubscribe,
} from './types.js';
import type { AccountDetails, AccountSummary, EquityPoint } from '../market/account.js';
import { BrokerAuthError, BrokerDisconnectedError, BrokerNotSupportedError, BrokerRequestError, BrokerTimeoutError } from '../market/brokerErrors.js';
import {
  RETCODES, type CloseByRequest, type CloseRequest, type Deal, type DeleteRequest, type ModifyRequest,
  type OpenedOrders, type Order, type OrderRequest, type Position, type RequestLookup, type Side,
  type TradeResult,
} from '../market/orders.js';
import type { ServerInfo, ServerTime, Tick } from '../market/server.js';
import type { SymbolInfo } from '../market/symbols.js';
import type { Candle, Timeframe } from '../market/timeframes.js';
import { TIMEFRAMES } from '../market/timeframes.js';
import { toCandle, type BarListener } from '../sim/candles.js';
import type { MarketSymbol } from '../sim/market.js';
import { conversionRate } from '../sim/accounting.js';

export class SimBrokerConnection implements BrokerConnection {
  /** The simulator runs on the holder's thread and journals trades in its database (BrokerConnection.inProcess). */
  readonly inProcess = true;
  readonly server: ServerInfo;
  readonly login: string;
  private _state: ConnectionState = 'disconnected';
  private account: SimAccount | null = null;
  private readonly host: SimServer;
  private readonly listeners = new BrokerListeners();
  // Created on first use: most accounts subscribe to nothing, and an empty Map still costs its table.
  private tickSubs: Map<MarketSymbol, (t: Tick) => void> | undefined;
  /** Per symbol, the timeframes wanted and the bar listener delivering them. */
  private candles: Map<MarketSymbol, { wanted: Set<number>; listener: BarListener }> | undefined;
  private readonly sink: AccountSink;
  /** Listeners of positions, orders and deals (see on()). */
  private accountListeners = 0;
  private unFault: (() => void) | null = null;
  private dropTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly sim: Simulator,
    private readonly credentials: BrokerCredentials,
  ) {
    const host = sim.server(credentials.server);
    if (!host) throw new BrokerRequestError('INVALID_REQUEST', `unknown broker server ${credentials.server}`);
    this.host = host;
    this.server = host.info;
    this.login = credentials.login;
    // Account events leave once the simulator's journal holds what they report (the store commits
    // a turn's changes together; trade replies wait for the same commit). Emitted at once, a deal
    // could reach /v1/stream (and its history) and then be lost with the journal to a crash: after a
    // SIGKILL the client held a TRADE that /OrderHistory never showed. Commits resolve in order, so
    // events keep theirs; a failed commit (disk full) reports nothing that was not stored. A store
    // with nothing pending (in memory, or committing at once) lets them leave at once.
    const durably = <T>(f: (x: T) => void) => (x: T) => {
      const pending = this.host.store.pendingCommit?.() ?? null;
      if (pending === null) f(x);
      else pending.then(() => f(x), () => undefined);
    };
    this.sink = {
      positions: durably((list) => this.emit('positions', list)),
      orders: durably((list) => this.emit('orders', list)),
      deal: durably((d) => this.emit('deal', d)),
    };
  }

  get state(): ConnectionState {
    return this._state;
  }

  on<E extends BrokerEventName>(event: E, listener: (data: BrokerEvents[E]) => void): Unsubscribe {
    const off = this.listeners.on(event, listener);
    if (event !== 'positions' && event !== 'orders' && event !== 'deal') return off;
    // The account's sink (position and order lists built on every change) is registered only
    // while someone listens to them.
    if (this.accountListeners++ === 0 && this._state === 'connected') this.attachSink();
    let done = false;
    return () => {
      off();
      if (done) return;
      done = true;
      if (--this.accountListeners === 0) this.detachSink();
    };
  }

  private attachSink(): void {
    if (!this.account) return;
    let sinks = this.host.sinks.get(this.account);
    if (!sinks) this.host.sinks.set(this.account, (sinks = new Set()));
    sinks.add(this.sink);
  }

  private detachSink(): void {
    if (this.account) this.host.sinks.get(this.account)?.delete(this.sink);
  }

  private emit<E extends BrokerEventName>(event: E, data: BrokerEvents[E]): void {
    this.listeners.emit(event, data);
  }

  private setState(state: ConnectionState, reason?: string): void {
    if (state === this._state) return;
    this._state = state;
    this.emit('state', { state, timeMsc: this.sim.clock.now(), ...(reason !== undefined ? { reason } : {}) });
  }

  async connect(): Promise<void> {
    if (this._state === 'connected') return;
    this.setState('connecting');
    const down = this.sim.faults.dropRemaining(this.server.name, this.login);
    if (down > 0) {
      this.setState('disconnected', 'server unreachable (injected drop)');
      throw new BrokerDisconnectedError(`server ${this.server.name} unreachable for ${down} ms`);
    }
    try {
      this.sim.advance();
      this.account = this.host.login(this.login, passwordOf(this.credentials.password));
    } catch (err) {
      this.setState('disconnected', err instanceof BrokerAuthError ? 'authentication failed' : 'login failed');
      throw err;
    }
    if (this.accountListeners > 0) this.attachSink();
    this.unFault = this.sim.faults.onSet((f) => {
      if (f.kind === 'drop' && f.server === this.server.name && (f.login === undefined || f.login === this.login)) {
        this.drop('connection lost (injected drop)');
      }
    });
    if (this.tickSubs) for (const [s, l] of this.tickSubs) this.host.tickListeners[s.index]!.add(l);
    this.setState('connected');
  }

  /** Tear down as a lost connection would: subscriptions stay registered locally and are
   *  restored by the next connect(). */
  private drop(reason: string): void {
    this.detach();
    this.setState('disconnected', reason);
  }

  private detach(): void {
    this.detachSink();
    if (this.tickSubs) for (const [s, l] of this.tickSubs) this.host.tickListeners[s.index]!.delete(l);
    this.unFault?.();
    this.unFault = null;
    if (this.dropTimer) clearTimeout(this.dropTimer);
    this.dropTimer = null;
  }

  async disconnect(): Promise<void> {
    this.detach();
    if (this.candles) for (const s of [...this.candles.keys()]) this.detachCandles(s);
    this.tickSubs = undefined;
    this.setState('disconnected', 'closed by client');
  }

  /** Gate of every request: connected, not dropped; then the injected latency; then the
   *  market is brought up to the clock. */
  private async ready(): Promise<SimAccount> {
    const latency = this.sim.faults.latency(this.server.name, this.login);
    if (latency === 0) return this.readyNow();
    this.gate();
    await new Promise((r) => setTimeout(r, latency));
    if (this._state !== 'connected') throw new BrokerDisconnectedError('connection lost while waiting');
    this.sim.advance();
    return this.account!;
  }

  /** ready() with no latency injected: at once, without a promise (the order's path). */
  private readyNow(): SimAccount {
    const acc = this.gate();
    this.sim.advance();
    return acc;
  }

  /** Connected, and not dropped by an injected fault (which drops it now). */
  private gate(): SimAccount {
    if (this._state !== 'connected' || !this.account) throw new BrokerDisconnectedError();
    if (this.sim.faults.dropRemaining(this.server.name, this.login) > 0) {
      this.drop('connection lost (injected drop)');
      throw new BrokerDisconnectedError('connection lost');
    }
    return this.account;
  }

  private sym(name: string): MarketSymbol {
    const s = this.host.market.bySymbol.get(name);
    if (!s) throw new BrokerRequestError('UNKNOWN_SYMBOL', `unknown symbol ${name}`);
    return s;
  }

  async accountSummary(): Promise<AccountSummary> {
    return (await this.ready()).summary();
  }

  async accountDetails(): Promise<AccountDetails> {
    const acc = await this.ready();
    const cfg = this.host.config;
    return {
      login: this.login,
      name: acc.data.name,
      server: this.server.name,
      platform: this.server.platform,
      timeZone: this.server.timeZone.description,
      utcOffsetMinutes: utcOffsetMinutes(this.server.timeZone, this.sim.clock.now()),
      currency: acc.data.currency,
      marginCall: cfg.account.marginCall,
      stopOut: cfg.account.stopOut,
      group: cfg.account.group,
      type: 'demo',
      leverage: acc.data.leverage,
      company: this.server.company,
      email: `${this.login}@demo.invalid`,
      phone: '+000 0000 0000',
      country: 'Simland',
      city: 'Sim City',
      address: '1 Simulation Street',
      registrationTimeMsc: acc.data.createdMs,
    };
  }

  async serverTime(): Promise<ServerTime> {
    await this.ready();
    const t = this.sim.clock.now();
    const off = utcOffsetMinutes(this.server.timeZone, t);
    return { timeMsc: t, serverTimeMsc: t + off * 60_000, utcOffsetMinutes: off };
  }

  private symbolInfo(s: MarketSymbol, currency: string): SymbolInfo {
    const m = this.host.market;
    const tickValue = s.info.tickSize * s.info.contractSize * conversionRate(m, s.info.currency, currency);
    return { ...s.info, tickValue };
  }

  async symbols(): Promise<readonly SymbolInfo[]> {
    const acc = await this.ready();
    return this.host.market.symbols.map((s) => this.symbolInfo(s, acc.data.currency));
  }

  async symbol(name: string): Promise<SymbolInfo | null> {
    const acc = await this.ready();
    const s = this.host.market.bySymbol.get(name);
    return s ? this.symbolInfo(s, acc.data.currency) : null;
  }

  async quote(symbol: string): Promise<Tick | null> {
    await this.ready();
    const s = this.host.market.bySymbol.get(symbol);
    return s ? this.host.market.tick(s) : null;
  }

  async requiredMargin(symbol: string, volume: number, side: Side, price?: number): Promise<number> {
    const acc = await this.ready();
    const s = this.sym(symbol);
    const m = this.host.market;
    const p = price ?? (side === 'Buy' ? m.ask(s) : m.bid(s));
    return Math.round(marginFor(m, s.info, volume, p, acc.data.leverage, acc.data.currency) * 100) / 100;
  }

  // ---- trading ---------------------------------------------------------------------------

  get claimsAtomically(): boolean {
    return this.host.store.bookAtomically !== undefined;
  }

  /** An atomic claim with no latency injected (the order's path) is booked at once, with no async
   *  function and no await (~1 KB of promises and frames an order, issue 19); else `tradeLater`. */
  private trade(opts: TradeOptions | undefined, op: (acc: SimAccount) => TradeResult): Promise<TradeResult> {
    const claim = opts?.claim;
    if (!claim || !this.claimsAtomically || this.sim.faults.latency(this.server.name, this.login) > 0) return this.tradeLater(opts, op);
    try {
      const acc = this.readyNow();
      const requestId = opts.requestId;
      const fault = this.sim.faults.tradeFault(this.server.name, this.login);
      const booked = this.host.store.bookAtomically!(claim, () => this.book(acc, requestId, fault, op));
      // book() ran inside bookAtomically: a request id it knew is answered as it was, fault or not.
      if (this.bookedKnown || fault !== 'timeoutAfterSend') return booked;
      return booked.then(() => {
        throw new BrokerTimeoutError(true, 'broker reply lost after send (injected fault)', requestId);
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async tradeLater(opts: TradeOptions | undefined, op: (acc: SimAccount) => TradeResult): Promise<TradeResult> {
    let claim = opts?.claim;
    // A held reply (injected latency) waits before executing: the claim is committed before the
    // wait, as through a bridge, so a crash meanwhile leaves a durable 'sent' record.
    if (claim && (!this.claimsAtomically || this.sim.faults.latency(this.server.name, this.login) > 0)) {
      claim.check();
      claim.write(undefined);
      claim = undefined;
    }
    const acc = await this.ready();
    const requestId = opts?.requestId;
    const fault = this.sim.faults.tradeFault(this.server.name, this.login);
    const book = () => this.book(acc, requestId, fault, op);
    // Claimed atomically: the claim, the booking and what was queued commit now, in one transaction.
    let result: TradeResult;
    let seen: boolean;
    if (claim) {
      const booked = this.host.store.bookAtomically!(claim, book);
      seen = this.bookedKnown; // book() ran inside bookAtomically, before any other trade could
      result = await booked;
    } else {
      result = book();
      seen = this.bookedKnown;
    }
    if (seen) return result;
    if (!claim) await this.host.store.whenDurable();
    if (fault === 'timeoutAfterSend') throw new BrokerTimeoutError(true, 'broker reply lost after send (injected fault)', requestId);
    return result;
  }

  /** Whether the last `book` answered a request id it knew (its first outcome, replayed). */
  private bookedKnown = false;
  /** Executes the trade (or replays the outcome its request id had) and queues its changes. */
  private book(acc: SimAccount, requestId: string | undefined, fault: ReturnType<Simulator['faults']['tradeFault']>, op: (acc: SimAccount) => TradeResult): TradeResult {
    this.bookedKnown = false;
    if (requestId !== undefined) {
      const known = this.host.store.request(this.server.name, this.login, requestId);
      if (known) {
        this.bookedKnown = true;
        return known.result;
      }
    }
    const result: TradeResult = fault === 'reject'
      ? { ok: false, reason: 'REJECTED', message: 'request rejected by the broker (injected fault)', retcode: RETCODES.REJECTED }
      : op(acc);
    acc.flush(requestId !== undefined ? { requestId, timeMsc: this.host.market.now, result } : undefined);
    return result;
  }

  orderSend(req: OrderRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderSend(req));
  }
  orderModify(req: ModifyRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderModify(req));
  }
  orderClose(req: CloseRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderClose(req));
  }
  orderCloseBy(req: CloseByRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderCloseBy(req));
  }
  orderDelete(req: DeleteRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade(opts, (acc) => acc.orderDelete(req));
  }

  async lookupRequest(requestId: string): Promise<RequestLookup | null> {
    await this.ready();
    return this.host.store.request(this.server.name, this.login, requestId);
  }

  // ---- queries ---------------------------------------------------------------------------

  async openedOrders(): Promise<OpenedOrders> {
    const acc = await this.ready();
    return { positions: acc.positionList(), orders: acc.pendingList() };
  }

  async openedOrder(ticket: number): Promise<Position | Order | null> {
    const acc = await this.ready();
    const p = acc.positions.get(ticket);
    if (p) return acc.positionView(p);
    const o = acc.orders.get(ticket);
    return o && o.state === 'placed' ? o : null;
  }

  async historyDeals(fromMs: number, toMs: number): Promise<readonly Deal[]> {
    await this.ready();
    return this.host.store.deals(this.server.name, this.login, fromMs, toMs);
  }

  async historyOrders(fromMs: number, toMs: number): Promise<readonly Order[]> {
    await this.ready();
    return this.host.store.historyOrders(this.server.name, this.login, fromMs, toMs);
  }

  async balanceHistory(fromMs: number, toMs: number): Promise<readonly Deal[]> {
    if (!dialectOf(this.server.platform).balanceHistory) throw new BrokerNotSupportedError('balanceHistory', this.server.platform);
    return (await this.historyDeals(fromMs, toMs)).filter((d) => d.type === 'Balance');
  }

  async equityHistory(fromMs: number): Promise<readonly EquityPoint[]> {
    await this.ready();
    return this.host.store.equity(this.server.name, this.login, fromMs);
  }

  async priceHistory(symbol: string, timeframe: Timeframe, fromMs: number, toMs: number): Promise<readonly Candle[]> {
    await this.ready();
    return this.host.market.priceHistory(this.sym(symbol), timeframe, fromMs, toMs);
  }

  async quoteHistory(symbol: string, timeframe: Timeframe, fromMs: number, count: number): Promise<readonly Candle[]> {
    await this.ready();
    return this.host.market.quoteHistory(this.sym(symbol), timeframe, fromMs, count);
  }

  // ---- subscriptions ---------------------------------------------------------------------

  async subscribe(symbols: readonly string[]): Promise<void> {
    await this.ready();
    const list = symbols.map((n) => this.sym(n));
    for (const s of list) {
      if (this.tickSubs?.has(s)) continue;
      const l = (t: Tick) => this.emit('tick', t);
      (this.tickSubs ??= new Map()).set(s, l);
      this.host.tickListeners[s.index]!.add(l);
    }
  }

  async unsubscribe(symbols: readonly string[]): Promise<void> {
    for (const n of symbols) {
      const s = this.host.market.bySymbol.get(n);
      const l = s && this.tickSubs?.get(s);
      if (!s || !l) continue;
      this.host.tickListeners[s.index]!.delete(l);
      this.tickSubs!.delete(s);
    }
  }

  async subscribeCandles(symbol: string, timeframes: readonly Timeframe[]): Promise<void> {
    await this.ready();
    const s = this.sym(symbol);
    let maxTf = 0;
    for (const tf of timeframes) maxTf = Math.max(maxTf, TIMEFRAMES.indexOf(tf));
    const bars = this.host.market.enableBars(s, TIMEFRAMES[maxTf]!);
    let set = this.candles?.get(s)?.wanted;
    if (!set) {
      set = new Set();
      const clock = this.host.market.clock;
      const wanted = set;
      const listener: BarListener = (k, start, o, closed) => {
        if (wanted.has(k) && this._state === 'connected') {
          this.emit('candle', { symbol, timeframe: TIMEFRAMES[k]!, candle: toCandle(start, clock, o, s.feed.scale), closed });
        }
      };
      bars.listeners.add(listener);
      (this.candles ??= new Map()).set(s, { wanted: set, listener });
    }
    for (const tf of timeframes) set.add(TIMEFRAMES.indexOf(tf));
  }

  async unsubscribeCandles(symbol: string, timeframes?: readonly Timeframe[]): Promise<void> {
    const s = this.host.market.bySymbol.get(symbol);
    const set = s && this.candles?.get(s)?.wanted;
    if (!s || !set) return;
    if (timeframes) for (const tf of timeframes) set.delete(TIMEFRAMES.indexOf(tf));
    if (!timeframes || set.size === 0) this.detachCandles(s);
  }

  private detachCandles(s: MarketSymbol): void {
    const c = this.candles?.get(s);
    if (c) s.bars?.listeners.delete(c.listener);
    this.candles?.delete(s);
  }
}

export interface CreateSimulatorOptions {
  /** SQLite database for simulator state (tables sim_*); omit for in-memory state. */
  readonly db?: Database.Database;
  readonly configPath?: string;
  readonly seed?: number;
  readonly clock?: Clock;
  /** Drive the market from a timer every N ms (default 20); false for manual advance(). */
  readonly driveMs?: number | false;
  /** Bookings made while it is open share one commit (SqliteSimStore). */
  readonly commitGroup?: CommitGroup;
}

/** One simulator for this thread: config (and replay files) from disk, SQLite or memory
 *  persistence, market driven by a timer. */
export function createSimulator(options: CreateSimulatorOptions = {}): Simulator {
  const path = options.configPath ?? DEFAULT_CONFIG_PATH;
  const config = loadSimConfig(path, options.seed !== undefined ? { seed: options.seed } : {});
  const store = options.db ? new SqliteSimStore(options.db, options.commitGroup ? { commitGroup: options.commitGroup } : {}) : new MemorySimStore();
  const sim = new Simulator({ config, store, replay: loadReplayData(config, dirname(path)), ...(options.clock ? { clock: options.clock } : {}) });
  if (options.driveMs !== false) sim.start(options.driveMs ?? 20);
  return sim;
}

/** BrokerConnectionFactory over a simulator: one connection per login. */
export function simConnectionFactory(sim: Simulator): BrokerConnectionFactory {
  return (credentials) => new SimBrokerConnection(sim, credentials);
}
