// BrokerConnection over the bridge protocol (TCP, newline-delimited JSON). What it
// guarantees across a dropped socket:
// - in-flight requests are rejected at once: trades already written with
//   BrokerTimeoutError{sent:true} (they may have executed), everything else with
//   BrokerDisconnectedError; a request without reply in `requestTimeoutMs` is rejected the
//   same way;
// - every trade carries a requestId (generated if the caller gave none), so resending it
//   after a lost reply returns the broker's first outcome instead of trading twice;
// - connect() after a drop logs in again, restores subscriptions and resynchronizes:
//   fresh positions/orders snapshots, and the deals executed while away (from the last
//   deal seen, deduplicated by ticket), so listeners miss nothing and see nothing twice.
import { BrokerListeners } from './listeners.js';
import { randomUUID } from 'node:crypto';
import { connect as netConnect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import {
  BRIDGE_PROTOCOL_VERSION, decodeError, isFrameObject, LineReader, POSITIONS_DELTA, PositionsDeltaDecoder, TRADE_OPS, type ErrorBody,
  type PositionsDelta,
} from './bridgeProtocol.js';
import { passwordOf, type BrokerConnection, type BrokerEventName, type BrokerEvents, type ConnectionState, type Password, type TradeOptions, type Unsubscribe } from './types.js';
import type { AccountDetails, AccountSummary, EquityPoint } from '../market/account.js';
import { BrokerDisconnectedError, BrokerTimeoutError } from '../market/brokerErrors.js';
import type {
  CloseByRequest, CloseRequest, Deal, DeleteRequest, ModifyRequest, OpenedOrders, Order, OrderRequest,
  Position, RequestLookup, Side, TradeResult,
} from '../market/orders.js';
import type { Platform, ServerInfo, ServerTime, Tick } from '../market/server.js';
import type { SymbolInfo } from '../market/symbols.js';
import type { Candle, Timeframe } from '../market/timeframes.js';
import { systemClock, type Clock } from '../util/clock.js';
import { KeyedTable } from '../util/keyedTable.js';

export interface BridgeOptions {
  readonly host: string;
  readonly port: number;
  readonly server: string;
  readonly login: string;
  /** Asked at each login (the first connect and every reconnect), never kept by the connection. */
  readonly password: Password;
  /** Platform until the hello reply tells (the gateway knows it from the broker account). */
  readonly platform?: Platform;
  readonly requestTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
  /** tls:// bridge: TLS with the certificate verified (chain and host name), before the hello
   *  carries the password; `ca` pins the CA (PEM) instead of the system's roots. */
  readonly tls?: { readonly ca?: string | Buffer };
  /** Phase-change times and the deal lookback of a first resync (default: the system clock). */
  readonly clock?: Clock;
  /** Told why the bridge could not be reached (refused, timed out, its certificate failed the
   *  check); the error names host, port and the TLS reason, never the password. */
  readonly onConnectError?: (err: Error) => void;
}

interface Pending {
  readonly op: string;
  readonly requestId: string | undefined;
  readonly resolve: (v: unknown) => void;
  readonly reject: (e: Error) => void;
  readonly timer: ReturnType<typeof setTimeout>;
}


/** Deals can arrive out of time order by up to a segment window (1 s); re-read and dedup
 *  this far behind the newest deal seen. */
const DEAL_SLACK_MS = 60_000;
/** How far back deals are re-read after a reconnect when none was seen yet (ms). */
const RESYNC_LOOKBACK_MS = 7 * 86_400_000;

const EVENT_NAMES: ReadonlySet<string> = new Set(['tick', 'positions', POSITIONS_DELTA, 'orders', 'deal', 'candle']);

/** The frame shapes of docs/bridge-protocol.md: an event with its data, or a reply to a numeric id. */
function wellFormed(f: Record<string, unknown>): boolean {
  if (f.event !== undefined) {
    if (typeof f.event !== 'string' || !EVENT_NAMES.has(f.event) || !isObjectOrArray(f.data)) return false;
    if (f.event === POSITIONS_DELTA) return Array.isArray((f.data as PositionsDelta).upsert) && Array.isArray((f.data as PositionsDelta).removed);
    return f.event !== 'deal' || typeof (f.data as { ticket?: unknown }).ticket === 'number';
  }
  if (typeof f.id !== 'number') return false;
  return f.error === undefined || (isFrameObject(f.error) && typeof f.error.code === 'string');
}
const isObjectOrArray = (v: unknown) => typeof v === 'object' && v !== null;

export class BridgeBrokerConnection implements BrokerConnection {
  private info: ServerInfo;
  /** `info` came from the server (hello); before that it is a placeholder. */
  private known = false;
  readonly login: string;
  private _state: ConnectionState = 'disconnected';
  private socket: Socket | null = null;
  private nextId = 1;
  /** Not a Map: see KeyedTable (keys always new, soon deleted: a call in flight each). */
  private readonly pending = new KeyedTable<number, Pending>(true);
  private readonly listeners = new BrokerListeners();
  private readonly tickSymbols = new Set<string>();
  private readonly candleSubs = new Map<string, Set<Timeframe>>();
  /** Deals delivered recently (ticket -> time): the dedup set for resync. Deal times are
   *  not strictly ordered across symbols (a tick-triggered fill carries its tick's time), so
   *  dedup is by ticket (and its time) over a time slack, not by a time watermark alone. */
  private readonly seenDeals = new Map<number, number>();
  private maxDealTime = -1;
  private connecting: Promise<void> | null = null;
  private everConnected = false;
  private readonly clock: Clock;
  /** This socket's positions, when its server sends them as deltas (a new one per login). */
  private positionsDelta = new PositionsDeltaDecoder();

  constructor(private readonly options: BridgeOptions) {
    this.clock = options.clock ?? systemClock;
    this.login = options.login;
    this.info = {
      name: options.server,
      platform: options.platform ?? 'P5',
      build: 0,
      company: '',
      timeZone: { description: 'unknown until connected', standardOffsetMinutes: 0, dst: 'none' },
    };
  }

  /** A placeholder until the first login (see `serverKnown`): its time zone is not the server's. */
  get server(): ServerInfo {
    return this.info;
  }
  get serverKnown(): boolean {
    return this.known;
  }
  get state(): ConnectionState {
    return this._state;
  }

  on<E extends BrokerEventName>(event: E, listener: (data: BrokerEvents[E]) => void): Unsubscribe {
    return this.listeners.on(event, listener);
  }
  private emit<E extends BrokerEventName>(event: E, data: BrokerEvents[E]): void {
    this.listeners.emit(event, data);
  }
  private setState(state: ConnectionState, reason?: string): void {
    if (state === this._state) return;
    this._state = state;
    this.emit('state', { state, timeMsc: this.clock.now(), ...(reason !== undefined ? { reason } : {}) });
  }

  // ---- connection lifecycle ------------------------------------------------------------

  /** disconnect() was called since the last connect(): a login it cut short is not the bridge's failure. */
  private closedByClient = false;

  connect(): Promise<void> {
    this.closedByClient = false;
    if (this._state === 'connected') return Promise.resolve();
    this.connecting ??= this.doConnect().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  private async doConnect(): Promise<void> {
    this.setState('connecting');
    const socket = await this.openSocket().catch((err: unknown) => {
      this.setState('disconnected', 'connect failed');
      const failed = new BrokerDisconnectedError(`cannot reach bridge ${this.options.host}:${this.options.port}${this.options.tls ? ` over TLS (${(err as Error).message})` : ''}`, { cause: err });
      this.options.onConnectError?.(failed);
      throw failed;
    });
    this.socket = socket;
    this.positionsDelta = new PositionsDeltaDecoder();
    try {
      const hello = (await this.request('hello', {
        version: BRIDGE_PROTOCOL_VERSION,
        server: this.options.server,
        login: this.options.login,
        password: passwordOf(this.options.password),
        features: [POSITIONS_DELTA],
      })) as { version: number; server: ServerInfo };
      // A clock offset only as a whole number of ms (a simulator started at --start); anything else: none.
      const off = hello.server.clockOffsetMs;
      this.info = off === undefined || Number.isSafeInteger(off) ? hello.server : { ...hello.server, clockOffsetMs: undefined };
      this.known = true;
      if (this.tickSymbols.size > 0) await this.request('subscribe', { symbols: [...this.tickSymbols] });
      for (const [symbol, tfs] of this.candleSubs) await this.request('subscribeCandles', { symbol, timeframes: [...tfs] });
      if (!this.everConnected) await this.markHistorySeen();
      this.setState('connected');
      if (this.everConnected) await this.resync();
      this.everConnected = true;
    } catch (err) {
      this.closeSocket('login failed');
      // Reached, but the login did not complete: no answer, or the socket closed under it (a
      // bridge that hangs, another service on that port). A refusal is the account's own (logged
      // as its phase); this is the bridge's, said as an unreachable one is.
      // Closed by this side (an account removed or re-bound, a probe done with) says nothing of it.
      if (!this.closedByClient && (err instanceof BrokerTimeoutError || err instanceof BrokerDisconnectedError)) {
        this.options.onConnectError?.(new BrokerDisconnectedError(`bridge ${this.options.host}:${this.options.port} took the connection but the login did not complete (${err.message})`, { cause: err }));
      }
      throw err;
    }
  }

  private openSocket(): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const { host, port, tls } = this.options;
      // rejectUnauthorized is Node's default; said here because the password follows the handshake.
      const socket = tls
        ? tlsConnect({ host, port, rejectUnauthorized: true, ...(tls.ca ? { ca: tls.ca } : {}), ...(isIP(host) ? {} : { servername: host }) })
        : netConnect({ host, port });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('connect timeout'));
      }, this.options.connectTimeoutMs ?? 5000);
      socket.once(tls ? 'secureConnect' : 'connect', () => {
        clearTimeout(timer);
        socket.setNoDelay(true);
        socket.setEncoding('utf8');
        const reader = new LineReader((line) => this.onLine(line));
        socket.on('data', (chunk: string) => reader.push(chunk));
        socket.on('close', () => {
          if (this.socket === socket) this.onSocketLost('connection lost');
        });
        socket.on('error', () => socket.destroy());
        resolve(socket);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  /** First login: deals up to now are history, not events; remember the watermark. */
  private async markHistorySeen(): Promise<void> {
    const t = (await this.request('serverTime', {})) as ServerTime;
    const deals = (await this.request('historyDeals', { fromMs: t.timeMsc - DEAL_SLACK_MS, toMs: Number.MAX_SAFE_INTEGER })) as Deal[];
    this.maxDealTime = Math.max(this.maxDealTime, t.timeMsc);
    for (const d of deals) this.markSeen(d);
  }

  /** After a reconnect: snapshots, then the deals executed while we were away. */
  private async resync(): Promise<void> {
    const opened = (await this.request('openedOrders', {})) as OpenedOrders;
    this.emit('positions', opened.positions);
    this.emit('orders', opened.orders);
    const since = this.maxDealTime >= 0 ? this.maxDealTime - DEAL_SLACK_MS : this.clock.now() - RESYNC_LOOKBACK_MS;
    const deals = (await this.request('historyDeals', { fromMs: since, toMs: Number.MAX_SAFE_INTEGER })) as Deal[];
    for (const d of deals) this.onDeal(d);
  }

  private onDeal(d: Deal): void {
    // A deal seen already has its ticket *and* its time: a broker that lost its state (a simulator
    // restarted without --data) numbers its new deals from the start again, with later times.
    if (this.seenDeals.get(d.ticket) === d.timeMsc) return;
    this.markSeen(d);
    this.emit('deal', d);
  }

  private markSeen(d: Deal): void {
    this.seenDeals.set(d.ticket, d.timeMsc);
    if (d.timeMsc > this.maxDealTime) this.maxDealTime = d.timeMsc;
    if (this.seenDeals.size > 10_000) {
      const horizon = this.maxDealTime - DEAL_SLACK_MS;
      for (const [ticket, time] of this.seenDeals) if (time < horizon) this.seenDeals.delete(ticket);
    }
  }

  private onSocketLost(reason: string): void {
    this.socket = null;
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      // Written but unanswered: a trade may have executed at the broker.
      p.reject(TRADE_OPS.has(p.op) ? new BrokerTimeoutError(true, `connection lost after sending ${p.op}`, p.requestId) : new BrokerDisconnectedError(`connection lost during ${p.op}`));
    }
    this.setState('disconnected', reason);
  }

  private closeSocket(reason: string): void {
    const s = this.socket;
    if (s) {
      this.onSocketLost(reason);
      s.destroy();
    } else {
      this.setState('disconnected', reason);
    }
  }

  async disconnect(): Promise<void> {
    this.closedByClient = true;
    this.closeSocket('closed by client');
  }

  // ---- requests --------------------------------------------------------------------------

  private onLine(line: string): void {
    let frame: { id?: number; result?: unknown; error?: ErrorBody; event?: BrokerEventName | typeof POSITIONS_DELTA; data?: unknown };
    try {
      const parsed: unknown = JSON.parse(line);
      if (!isFrameObject(parsed) || !wellFormed(parsed)) throw new Error('not a bridge frame');
      frame = parsed as typeof frame;
    } catch {
      // Not the protocol: drop the socket (in-flight trades end as sent, unknown outcome) and
      // reconnect, rather than throw in the socket's data handler, which would end the thread.
      this.socket?.destroy();
      return;
    }
    if (frame.event !== undefined) {
      if (frame.event === 'deal') this.onDeal(frame.data as Deal);
      else if (frame.event === POSITIONS_DELTA) this.emit('positions', this.positionsDelta.apply(frame.data as PositionsDelta));
      else this.emit(frame.event, frame.data as never);
      return;
    }
    const p = frame.id !== undefined ? this.pending.get(frame.id) : undefined;
    if (!p) return; // a reply after its timeout
    this.pending.delete(frame.id!);
    clearTimeout(p.timer);
    if (frame.error) p.reject(decodeError(frame.error));
    else p.resolve(frame.result);
  }

  private request(op: string, args: Record<string, unknown>): Promise<unknown> {
    const socket = this.socket;
    if (!socket || socket.destroyed || (this._state !== 'connected' && this._state !== 'connecting')) {
      return Promise.reject(new BrokerDisconnectedError());
    }
    const id = this.nextId++;
    const requestId = (args.opts as TradeOptions | undefined)?.requestId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new BrokerTimeoutError(true, `no reply to ${op} within ${this.timeoutMs} ms`, requestId));
      }, this.timeoutMs);
      this.pending.set(id, { op, requestId, resolve, reject, timer });
      socket.write(JSON.stringify({ id, op, args }) + '\n');
    });
  }

  private get timeoutMs(): number {
    return this.options.requestTimeoutMs ?? 10_000;
  }

  private async call<T>(op: string, args: Record<string, unknown> = {}): Promise<T> {
    return (await this.request(op, args)) as T;
  }

  private trade(op: string, req: object, opts?: TradeOptions): Promise<TradeResult> {
    return this.call<TradeResult>(op, { req, opts: { requestId: opts?.requestId ?? `br-${randomUUID()}` } });
  }

  accountSummary(): Promise<AccountSummary> {
    return this.call('accountSummary');
  }
  accountDetails(): Promise<AccountDetails> {
    return this.call('accountDetails');
  }
  serverTime(): Promise<ServerTime> {
    return this.call('serverTime');
  }
  symbols(): Promise<readonly SymbolInfo[]> {
    return this.call('symbols');
  }
  symbol(name: string): Promise<SymbolInfo | null> {
    return this.call('symbol', { name });
  }
  quote(symbol: string): Promise<Tick | null> {
    return this.call('quote', { symbol });
  }
  requiredMargin(symbol: string, volume: number, side: Side, price?: number): Promise<number> {
    return this.call('requiredMargin', { symbol, volume, side, ...(price !== undefined ? { price } : {}) });
  }
  orderSend(req: OrderRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade('orderSend', req, opts);
  }
  orderModify(req: ModifyRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade('orderModify', req, opts);
  }
  orderClose(req: CloseRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade('orderClose', req, opts);
  }
  orderCloseBy(req: CloseByRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade('orderCloseBy', req, opts);
  }
  orderDelete(req: DeleteRequest, opts?: TradeOptions): Promise<TradeResult> {
    return this.trade('orderDelete', req, opts);
  }
  lookupRequest(requestId: string): Promise<RequestLookup | null> {
    return this.call('lookupRequest', { requestId });
  }
  openedOrders(): Promise<OpenedOrders> {
    return this.call('openedOrders');
  }
  openedOrder(ticket: number): Promise<Position | Order | null> {
    return this.call('openedOrder', { ticket });
  }
  historyDeals(fromMs: number, toMs: number): Promise<readonly Deal[]> {
    return this.call('historyDeals', { fromMs, toMs });
  }
  historyOrders(fromMs: number, toMs: number): Promise<readonly Order[]> {
    return this.call('historyOrders', { fromMs, toMs });
  }
  balanceHistory(fromMs: number, toMs: number): Promise<readonly Deal[]> {
    return this.call('balanceHistory', { fromMs, toMs });
  }
  equityHistory(fromMs: number): Promise<readonly EquityPoint[]> {
    return this.call('equityHistory', { fromMs });
  }
  priceHistory(symbol: string, timeframe: Timeframe, fromMs: number, toMs: number): Promise<readonly Candle[]> {
    return this.call('priceHistory', { symbol, timeframe, fromMs, toMs });
  }
  quoteHistory(symbol: string, timeframe: Timeframe, fromMs: number, count: number): Promise<readonly Candle[]> {
    return this.call('quoteHistory', { symbol, timeframe, fromMs, count });
  }

  async subscribe(symbols: readonly string[]): Promise<void> {
    await this.call('subscribe', { symbols });
    for (const s of symbols) this.tickSymbols.add(s);
  }
  async unsubscribe(symbols: readonly string[]): Promise<void> {
    for (const s of symbols) this.tickSymbols.delete(s);
    if (this._state === 'connected') await this.call('unsubscribe', { symbols });
  }
  async subscribeCandles(symbol: string, timeframes: readonly Timeframe[]): Promise<void> {
    await this.call('subscribeCandles', { symbol, timeframes });
    let set = this.candleSubs.get(symbol);
    if (!set) this.candleSubs.set(symbol, (set = new Set()));
    for (const tf of timeframes) set.add(tf);
  }
  async unsubscribeCandles(symbol: string, timeframes?: readonly Timeframe[]): Promise<void> {
    const set = this.candleSubs.get(symbol);
    if (set && timeframes) for (const tf of timeframes) set.delete(tf);
    if (!timeframes || set?.size === 0) this.candleSubs.delete(symbol);
    if (this._state === 'connected') await this.call('unsubscribeCandles', { symbol, ...(timeframes ? { timeframes } : {}) });
  }
}
