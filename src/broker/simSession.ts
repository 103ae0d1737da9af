// The session of a simulated login (the base of SimBrokerConnection in ./sim.ts): its connection
// state and the injected drops that end it, the gate every request passes, the account events
// (left once the journal holds them) and the tick and candle subscriptions, which outlive a drop
// and are restored by the next connect(), and deliver nothing while an injected mute lasts.
import { BrokerListeners } from './listeners.js';
import type { SimAccount } from '../sim/account.js';
import type { AccountSink, FaultWatcher, SimServer, Simulator } from '../sim/simulator.js';
import type { Fault } from '../sim/faults.js';
import {
  passwordOf, type BrokerCredentials, type BrokerEventName, type BrokerEvents, type ConnectionState, type Unsubscribe,
} from './types.js';
import { BrokerAuthError, BrokerDisconnectedError, BrokerRequestError } from '../market/brokerErrors.js';
import type { ServerInfo, Tick } from '../market/server.js';
import type { Timeframe } from '../market/timeframes.js';
import { TIMEFRAMES } from '../market/timeframes.js';
import { toCandle, type BarListener } from '../sim/candles.js';
import type { MarketSymbol } from '../sim/market.js';

export abstract class SimSession implements FaultWatcher {
  readonly server: ServerInfo;
  readonly login: string;
  private _state: ConnectionState = 'disconnected';
  private account: SimAccount | null = null;
  protected readonly host: SimServer;
  private readonly listeners = new BrokerListeners();
  // Created on first use: most accounts subscribe to nothing, and an empty Map still costs its table.
  private tickSubs: Map<MarketSymbol, (t: Tick) => void> | undefined;
  /** Per symbol, the timeframes wanted and the bar listener delivering them. */
  private candles: Map<MarketSymbol, { wanted: Set<number>; listener: BarListener }> | undefined;
  /** Made by the first listener of positions, orders or deals (an idle account has none). */
  private sink: AccountSink | undefined;
  /** Listeners of positions, orders and deals (see on()). */
  private accountListeners = 0;
  private dropTimer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    protected readonly sim: Simulator,
    private readonly credentials: BrokerCredentials,
  ) {
    const host = sim.server(credentials.server);
    if (!host) throw new BrokerRequestError('INVALID_REQUEST', `unknown broker server ${credentials.server}`);
    this.host = host;
    this.server = host.info;
    this.login = credentials.login;
  }

  /**
   * What the simulator tells this connection of its account. Account events leave once the
   * simulator's journal holds what they report (the store commits a turn's changes together;
   * trade replies wait for the same commit). Emitted at once, a deal could reach /v1/stream (and
   * its history) and then be lost with the journal to a crash: after a SIGKILL the client held a
   * TRADE that /OrderHistory never showed. Commits resolve in order, so events keep theirs; a
   * failed commit (disk full) reports nothing that was not stored. A store with nothing pending
   * (in memory, or committing at once) lets them leave at once.
   */
  private makeSink(): AccountSink {
    const durably = <T>(f: (x: T) => void) => (x: T) => {
      const pending = this.host.store.pendingCommit?.() ?? null;
      if (pending === null) f(x);
      else pending.then(() => f(x), () => undefined);
    };
    return {
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
    sinks.add((this.sink ??= this.makeSink()));
  }

  private detachSink(): void {
    if (this.account && this.sink) this.host.sinks.get(this.account)?.delete(this.sink);
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
    this.host.faultWatchers.add(this);
    if (this.tickSubs) for (const [s, l] of this.tickSubs) this.host.tickListeners[s.index]!.add(l);
    this.setState('connected');
  }

  /** A fault was set on this connection's server (FaultWatcher): an injected drop of it ends it. */
  faultSet(f: Fault): void {
    if (f.kind === 'drop' && f.server === this.server.name && (f.login === undefined || f.login === this.login)) {
      this.drop('connection lost (injected drop)');
    }
  }

  /** Tear down as a lost connection would: subscriptions stay registered locally and are
   *  restored by the next connect(). */
  private drop(reason: string): void {
    this.detach();
    this.setState('disconnected', reason);
  }

  private detach(): void {
    this.detachSink();
    // Logged out: the server lets the account go once nobody is logged in and nothing is open.
    if (this.account) this.host.logout(this.account);
    this.account = null;
    if (this.tickSubs) for (const [s, l] of this.tickSubs) this.host.tickListeners[s.index]!.delete(l);
    this.host.faultWatchers.delete(this);
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
  protected async ready(): Promise<SimAccount> {
    const latency = this.sim.faults.latency(this.server.name, this.login);
    if (latency === 0) return this.readyNow();
    this.gate();
    await new Promise((r) => setTimeout(r, latency));
    if (this._state !== 'connected') throw new BrokerDisconnectedError('connection lost while waiting');
    this.sim.advance();
    return this.account!;
  }

  /** ready() with no latency injected: at once, without a promise (the order's path). */
  protected readyNow(): SimAccount {
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

  protected sym(name: string): MarketSymbol {
    const s = this.host.market.bySymbol.get(name);
    if (!s) throw new BrokerRequestError('UNKNOWN_SYMBOL', `unknown symbol ${name}`);
    return s;
  }
  // ---- subscriptions ---------------------------------------------------------------------

  async subscribe(symbols: readonly string[]): Promise<void> {
    await this.ready();
    const list = symbols.map((n) => this.sym(n));
    for (const s of list) {
      if (this.tickSubs?.has(s)) continue;
      const l = (t: Tick) => {
        if (!this.sim.faults.muted(this.server.name, this.login)) this.emit('tick', t);
      };
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
        if (wanted.has(k) && this._state === 'connected' && !this.sim.faults.muted(this.server.name, this.login)) {
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
