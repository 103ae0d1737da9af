// The contract between the actors and any broker upstream (the in-process simulator, the
// bridge client, a future real terminal bridge): the BrokerConnection interface, its events and
// its errors. The plain data it speaks (orders, symbols, candles, server clocks) is the trading
// vocabulary in ../market/.
//
// Stability: additions are fine, breaking changes are not; other folders code against this.
import type { AccountDetails, AccountSummary, EquityPoint } from '../market/account.js';
import type {
  CloseByRequest, CloseRequest, Deal, DeleteRequest, ModifyRequest, OpenedOrders, Order, OrderRequest, Position, RequestLookup, Side, TradeResult,
} from '../market/orders.js';
import type { Platform, ServerInfo, ServerTime, Tick } from '../market/server.js';
import type { SymbolInfo } from '../market/symbols.js';
import type { Candle, CandleEvent, Timeframe } from '../market/timeframes.js';

export interface TradeOptions {
  /** Idempotency id of this request at the broker: a resend with the same id returns the
   *  first outcome instead of trading twice. Kept per account. */
  readonly requestId?: string;
  /** Only to a connection with `claimsAtomically`: the caller's claim, committed in the
   *  transaction that books the trade (see AtomicClaim). */
  readonly claim?: AtomicClaim;
}

/** An idempotency claim made with the trade's booking (an embedded broker, `claimsAtomically`). */
export interface AtomicClaim {
  /** Called before the trade executes; reads only; throws to refuse it (nothing is executed). */
  check(): void;
  /** The caller's writes, called after the trade executed in memory, inside the one transaction
   *  that commits them with its booking: `booked` is the trade's result (undefined when the
   *  booking threw), so the caller can store its outcome in the same commit. */
  write(booked: TradeResult | undefined): void;
}

// ---- connection -----------------------------------------------------------------------

export type ConnectionState = 'connecting' | 'connected' | 'disconnected';
export interface StateChange {
  readonly state: ConnectionState;
  readonly reason?: string;
  readonly timeMsc: number;
}

export interface BrokerEvents {
  tick: Tick;
  /** Full snapshot of open positions after any change. */
  positions: readonly Position[];
  /** Full snapshot of pending orders after any change. */
  orders: readonly Order[];
  deal: Deal;
  candle: CandleEvent;
  state: StateChange;
}
export type BrokerEventName = keyof BrokerEvents;
export type Unsubscribe = () => void;

/** A broker password, or a function that gives it at the moment a connection logs in: the gateway's
 *  shards keep it sealed and unseal it only then, so no account holds it in plain text. */
export type Password = string | (() => string);

/** The password itself, for a login: unsealed now when it is kept sealed (drop it after use). */
export function passwordOf(p: Password): string {
  return typeof p === 'function' ? p() : p;
}

export interface BrokerCredentials {
  readonly server: string;
  readonly login: string;
  readonly password: Password;
  /** The platform the login was bound as: what a connection that learns its server only at login
   *  (the bridge) reports until then. The in-process simulator knows its servers and ignores it. */
  readonly platform?: Platform;
}

/** One broker login. All I/O returns Promises so the in-process simulator and the bridge
 *  client share the interface. Broker rejections of trades are TradeResult values; promise
 *  rejections are transport problems (BrokerDisconnectedError, BrokerTimeoutError),
 *  authentication (BrokerAuthError), unsupported operations (BrokerNotSupportedError) or
 *  bad query arguments (BrokerRequestError). */
export interface BrokerConnection {
  /** The broker server. Read it only when `serverKnown` is not false: before that it is a
   *  placeholder (name and platform as given, build 0, time zone unknown, shown as UTC). */
  readonly server: ServerInfo;
  /** False while `server` is a placeholder: a bridge connection learns the server (platform, build,
   *  time zone) from its first login. Absent: the server is known from the start (the simulator). */
  readonly serverKnown?: boolean;
  readonly login: string;
  readonly state: ConnectionState;

  /** Resolves once logged in; rejects with BrokerAuthError on a wrong password. Calling it
   *  again after a drop reconnects and resynchronizes. */
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  on<E extends BrokerEventName>(event: E, listener: (data: BrokerEvents[E]) => void): Unsubscribe;

  accountSummary(): Promise<AccountSummary>;
  accountDetails(): Promise<AccountDetails>;
  serverTime(): Promise<ServerTime>;
  symbols(): Promise<readonly SymbolInfo[]>;
  symbol(name: string): Promise<SymbolInfo | null>;
  quote(symbol: string): Promise<Tick | null>;
  requiredMargin(symbol: string, volume: number, side: Side, price?: number): Promise<number>;

  orderSend(req: OrderRequest, opts?: TradeOptions): Promise<TradeResult>;
  orderModify(req: ModifyRequest, opts?: TradeOptions): Promise<TradeResult>;
  /** Closes an open position (fully or partly). A pending order's ticket is rejected
   *  (INVALID_TICKET): pending orders are cancelled with orderDelete (the P5 gateway's
   *  OrderCloseSafe sends a pending order's ticket there, docs/gateway.md). */
  orderClose(req: CloseRequest, opts?: TradeOptions): Promise<TradeResult>;
  orderCloseBy(req: CloseByRequest, opts?: TradeOptions): Promise<TradeResult>;
  /** Cancels a pending order; any other ticket is rejected (INVALID_TICKET). */
  orderDelete(req: DeleteRequest, opts?: TradeOptions): Promise<TradeResult>;
  /** What the broker did with a request id, or null if it never saw it. */
  lookupRequest(requestId: string): Promise<RequestLookup | null>;
  /**
   * True when the broker runs in the caller's own thread and records what it executes in the
   * caller's own database (the embedded simulator): after the caller restarts, nothing it sent
   * before can still be in transit, so lookupRequest's null is final ("never executed"), not
   * "may still arrive". Absent or false for a broker in another process (a bridge).
   */
  readonly inProcess?: boolean;
  /**
   * True when the broker books trades in the caller's own database and honours
   * `TradeOptions.claim` (the embedded simulator with SQLite persistence): the caller's claim and
   * the booking are then one transaction. Absent for a bridge: the claim is committed before the send.
   */
  readonly claimsAtomically?: boolean;

  openedOrders(): Promise<OpenedOrders>;
  /** An open position or pending order by ticket. */
  openedOrder(ticket: number): Promise<Position | Order | null>;
  /** Deals with fromMs <= timeMsc < toMs (UTC), ascending. */
  historyDeals(fromMs: number, toMs: number): Promise<readonly Deal[]>;
  /** Orders that left the book or were executed/closed in [fromMs, toMs), ascending. */
  historyOrders(fromMs: number, toMs: number): Promise<readonly Order[]>;
  /** Balance deals (P5 only; rejects with BrokerNotSupportedError on P4). */
  balanceHistory(fromMs: number, toMs: number): Promise<readonly Deal[]>;
  equityHistory(fromMs: number): Promise<readonly EquityPoint[]>;
  /** P5 PriceHistory: bars with fromMs <= open < toMs. */
  priceHistory(symbol: string, timeframe: Timeframe, fromMs: number, toMs: number): Promise<readonly Candle[]>;
  /** P4 QuoteHistory: the `count` bars whose open is <= fromMs, ascending. */
  quoteHistory(symbol: string, timeframe: Timeframe, fromMs: number, count: number): Promise<readonly Candle[]>;

  /** Tick events for these symbols (additive). Unknown symbols reject with BrokerRequestError. */
  subscribe(symbols: readonly string[]): Promise<void>;
  unsubscribe(symbols: readonly string[]): Promise<void>;
  /** Candle events for these timeframes of a symbol (additive). */
  subscribeCandles(symbol: string, timeframes: readonly Timeframe[]): Promise<void>;
  unsubscribeCandles(symbol: string, timeframes?: readonly Timeframe[]): Promise<void>;
}

export type BrokerConnectionFactory = (credentials: BrokerCredentials) => BrokerConnection;
