// The contract between the actors and any broker upstream (the in-process simulator, the
// bridge client, a future real terminal bridge). Everything here is plain data so it can
// cross worker-thread MessagePorts and the bridge socket unchanged.
//
// Time convention: every `*Msc` / `time*` field is UTC (epoch ms, or epoch seconds where
// stated). Broker server time is derived by the consumer with `toServerTime()` from
// `./time.js`, because `/v1/*` routes answer in server time and classic routes in UTC.
//
// Stability: additions are fine, breaking changes are not; other folders code against this.

export type Platform = 'P4' | 'P5';

/** How a server's clock differs from UTC. `dst` names the daylight-saving rule applied on top
 *  of `standardOffsetMinutes` (+60 while in effect). Many MT brokers run "New York close"
 *  time: UTC+2, UTC+3 while US DST is in effect (rule 'US'). */
export type DstRule = 'none' | 'US' | 'EU';
export interface ServerTimeZone {
  /** Human description, e.g. "GMT+2/GMT+3 (US DST)". */
  readonly description: string;
  readonly standardOffsetMinutes: number;
  readonly dst: DstRule;
}

export interface ServerInfo {
  readonly name: string;
  readonly platform: Platform;
  /** Terminal/server build number, e.g. 4620 (P5) or 1420 (P4). */
  readonly build: number;
  readonly company: string;
  readonly timeZone: ServerTimeZone;
}

/** Latest quote. `timeMsc` is UTC epoch ms. */
export interface Tick {
  readonly symbol: string;
  readonly bid: number;
  readonly ask: number;
  readonly timeMsc: number;
  readonly volume?: number;
}

// ---- orders ---------------------------------------------------------------------------

export const ORDER_TYPES = [
  'Buy',
  'Sell',
  'BuyLimit',
  'SellLimit',
  'BuyStop',
  'SellStop',
  'BuyStopLimit',
  'SellStopLimit',
] as const;
/** MT5 numbering: the index in ORDER_TYPES is the numeric code (0 Buy ... 7 SellStopLimit). */
export type OrderType = (typeof ORDER_TYPES)[number];
export type Side = 'Buy' | 'Sell';

export function orderTypeCode(type: OrderType): number {
  return ORDER_TYPES.indexOf(type);
}

/** Accepts a name (case-insensitive, e.g. "buylimit", "BuyLimit") or a numeric code
 *  (number or digit string). Returns undefined for anything else. */
export function parseOrderType(value: string | number): OrderType | undefined {
  if (typeof value === 'number' || /^\d+$/.test(value)) {
    const code = Number(value);
    return Number.isInteger(code) ? ORDER_TYPES[code] : undefined;
  }
  const lower = value.toLowerCase();
  return ORDER_TYPES.find((t) => t.toLowerCase() === lower);
}

export function isMarketType(type: OrderType): type is Side {
  return type === 'Buy' || type === 'Sell';
}
export function isStopLimitType(type: OrderType): boolean {
  return type === 'BuyStopLimit' || type === 'SellStopLimit';
}
export function sideOf(type: OrderType): Side {
  return type.startsWith('Buy') ? 'Buy' : 'Sell';
}

export interface OrderRequest {
  readonly symbol: string;
  readonly type: OrderType;
  /** Lots. */
  readonly volume: number;
  /** Required for pending orders; for market orders, the price the client saw (checked
   *  against `slippage`). */
  readonly price?: number;
  /** Stop-limit orders (P5 only): the limit price placed when `price` is reached. */
  readonly stopLimitPrice?: number;
  /** Max deviation in points from `price` for market orders; default: any. */
  readonly slippage?: number;
  readonly stoploss?: number;
  readonly takeprofit?: number;
  readonly comment?: string;
  readonly magic?: number;
  /** UTC epoch ms; pending orders only. */
  readonly expiration?: number;
}

/** Only passed fields change. 0 for stoploss/takeprofit removes the level (MT convention). */
export interface ModifyRequest {
  readonly ticket: number;
  readonly stoploss?: number;
  readonly takeprofit?: number;
  /** Pending orders only: new entry price. */
  readonly price?: number;
  readonly expiration?: number;
  readonly stopLimitPrice?: number;
}

export interface CloseRequest {
  readonly ticket: number;
  /** Partial close; default: the whole volume. */
  readonly lots?: number;
  readonly price?: number;
  readonly slippage?: number;
  readonly comment?: string;
}

export interface CloseByRequest {
  readonly ticket: number;
  readonly byTicket: number;
  readonly comment?: string;
}

export interface DeleteRequest {
  readonly ticket: number;
}

export interface TradeOptions {
  /** Idempotency id of this request at the broker: a resend with the same id returns the
   *  first outcome instead of trading twice. Kept per account. */
  readonly requestId?: string;
}

export type OrderState =
  | 'placed' // pending order waiting in the book
  | 'filled' // executed (P5 order done / P4 market ticket open)
  | 'partial' // partially filled (reserved; the simulator fills fully)
  | 'cancelled'
  | 'expired'
  | 'rejected'
  | 'closed'; // P4 ticket closed, or a P5 closing order done

export interface Order {
  readonly kind: 'order';
  readonly ticket: number;
  readonly symbol: string;
  readonly type: OrderType;
  readonly state: OrderState;
  /** Current (remaining) volume in lots. */
  readonly volume: number;
  readonly volumeInitial: number;
  /** Requested/entry price for pending orders; fill price for executed ones. */
  readonly openPrice: number;
  readonly openTimeMsc: number;
  /** Set when the order left the book or the P4 ticket was closed. */
  readonly closePrice?: number;
  readonly closeTimeMsc?: number;
  readonly sl: number;
  readonly tp: number;
  readonly stopLimitPrice?: number;
  readonly expiration?: number;
  readonly magic: number;
  readonly comment: string;
  readonly commission: number;
  readonly swap: number;
  readonly profit: number;
  /** Position this order opened or closed (0 for pending orders not yet triggered). */
  readonly positionId: number;
}

/** An open P5 position or an open P4 market ticket. `ticket` equals the ticket of the order
 *  that opened it (MT5 position identifier convention; on P4 it is the ticket itself). */
export interface Position {
  readonly kind: 'position';
  readonly ticket: number;
  readonly symbol: string;
  readonly type: Side;
  readonly volume: number;
  readonly openPrice: number;
  readonly openTimeMsc: number;
  /** Last price the position would close at (bid for buys, ask for sells). */
  readonly currentPrice: number;
  readonly sl: number;
  readonly tp: number;
  readonly magic: number;
  readonly comment: string;
  readonly commission: number;
  readonly swap: number;
  /** Floating profit in account currency (excludes commission and swap). */
  readonly profit: number;
}

export type DealType = 'Buy' | 'Sell' | 'Balance';
export type DealEntry = 'in' | 'out' | 'inout' | 'balance';

export interface Deal {
  readonly ticket: number;
  /** Order that caused the deal (0 for balance operations). */
  readonly order: number;
  /** Position id (0 for balance operations). */
  readonly position: number;
  readonly symbol: string;
  readonly type: DealType;
  readonly entry: DealEntry;
  readonly volume: number;
  readonly price: number;
  readonly timeMsc: number;
  /** magic number a.k.a. expertId. */
  readonly magic: number;
  readonly comment: string;
  readonly commission: number;
  readonly swap: number;
  /** Realized profit for 'out' deals; the amount for balance deals. */
  readonly profit: number;
}

export type RejectReason =
  | 'REQUOTE'
  | 'REJECTED' // generic broker reject (also what injected reject faults return)
  | 'INVALID_REQUEST'
  | 'INVALID_VOLUME'
  | 'INVALID_PRICE'
  | 'INVALID_STOPS'
  | 'INVALID_EXPIRATION'
  | 'TRADE_DISABLED'
  | 'MARKET_CLOSED'
  | 'NO_MONEY'
  | 'FROZEN'
  | 'UNSUPPORTED_ORDER_TYPE'
  | 'UNKNOWN_SYMBOL'
  | 'INVALID_TICKET'
  | 'NO_QUOTES';

/** MT5-style trade server return codes for each reason (10009 = done). */
export const RETCODES: Readonly<Record<RejectReason, number>> = {
  REQUOTE: 10004,
  REJECTED: 10006,
  INVALID_REQUEST: 10013,
  INVALID_VOLUME: 10014,
  INVALID_PRICE: 10015,
  INVALID_STOPS: 10016,
  TRADE_DISABLED: 10017,
  MARKET_CLOSED: 10018,
  NO_MONEY: 10019,
  NO_QUOTES: 10021,
  INVALID_EXPIRATION: 10022,
  FROZEN: 10029,
  UNSUPPORTED_ORDER_TYPE: 10030,
  INVALID_TICKET: 10036,
  UNKNOWN_SYMBOL: 10013,
};
export const RETCODE_DONE = 10009;

/** Broker rejections are values, never exceptions: they are final results the gateway
 *  replays for the same idempotency id. */
export type TradeResult =
  | { readonly ok: true; readonly order: Order; readonly deals: readonly Deal[]; readonly retcode: number }
  | { readonly ok: false; readonly reason: RejectReason; readonly message: string; readonly retcode: number };

export interface RequestLookup {
  readonly requestId: string;
  /** UTC ms when the broker executed the request. */
  readonly timeMsc: number;
  readonly result: TradeResult;
}

// ---- symbols ----------------------------------------------------------------------------

/** Minutes from server-clock midnight, [fromMin, toMin). */
export interface SessionWindow {
  readonly fromMin: number;
  readonly toMin: number;
}
/** Index 0 = Sunday ... 6 = Saturday, in server time. */
export type WeeklySessions = readonly (readonly SessionWindow[])[];

export type TradeMode = 'Full' | 'LongOnly' | 'ShortOnly' | 'CloseOnly' | 'Disabled';
/** Forex: lots*contractSize/leverage in margin currency. CFD: lots*contractSize*price
 *  (no leverage). CFDLeverage: lots*contractSize*price/leverage. Times marginRate. */
export type MarginCalcMode = 'Forex' | 'CFD' | 'CFDLeverage';

export interface SymbolInfo {
  readonly name: string;
  readonly description: string;
  /** Profit currency. */
  readonly currency: string;
  readonly baseCurrency: string;
  readonly marginCurrency: string;
  readonly digits: number;
  readonly point: number;
  readonly contractSize: number;
  readonly tickSize: number;
  /** Value of one tickSize move for 1 lot, in account currency, at the current price. */
  readonly tickValue: number;
  readonly marginCalcMode: MarginCalcMode;
  /** Fixed initial margin per lot in margin currency; 0 = use marginCalcMode. */
  readonly marginInitial: number;
  readonly marginMaintenance: number;
  /** Multiplier applied to the calculated margin. */
  readonly marginRate: number;
  /** e.g. "Forex\\Majors". */
  readonly group: string;
  readonly volumeMin: number;
  readonly volumeMax: number;
  readonly volumeStep: number;
  /** Minimum SL/TP/pending distance from the current price, in points. */
  readonly stopsLevel: number;
  /** Same value as stopsLevel (SPEC §2). */
  readonly limitPoints: number;
  /** Points within which an order or position can no longer be modified. */
  readonly freezeLevel: number;
  readonly tradeMode: TradeMode;
  readonly tradeSessions: WeeklySessions;
  readonly quoteSessions: WeeklySessions;
  /** Swap per lot per night, in points (MT "swap in points" mode). */
  readonly swapLong: number;
  readonly swapShort: number;
  /** Commission per lot per side in account currency (charged on each deal, negative). */
  readonly commissionPerLot: number;
  /** Typical spread in points. */
  readonly spread: number;
}

// ---- account ------------------------------------------------------------------------------

export interface AccountSummary {
  readonly balance: number;
  readonly credit: number;
  readonly equity: number;
  /** Floating profit of open positions. */
  readonly profit: number;
  readonly margin: number;
  readonly freeMargin: number;
  /** Percent; 0 when there is no margin in use. */
  readonly marginLevel: number;
  readonly leverage: number;
  readonly currency: string;
}

export interface AccountDetails {
  readonly login: string;
  readonly name: string;
  readonly server: string;
  readonly platform: Platform;
  readonly timeZone: string;
  readonly utcOffsetMinutes: number;
  readonly currency: string;
  /** Percent margin levels. */
  readonly marginCall: number;
  readonly stopOut: number;
  readonly group: string;
  readonly type: 'demo' | 'real' | 'contest';
  readonly leverage: number;
  readonly company: string;
  /** Holder profile (personal data; SPEC §2 `/Account`). */
  readonly email: string;
  readonly phone: string;
  readonly country: string;
  readonly city: string;
  readonly address: string;
  readonly registrationTimeMsc: number;
}

export interface EquityPoint {
  readonly timeMsc: number;
  readonly balance: number;
  readonly equity: number;
}

export interface ServerTime {
  readonly timeMsc: number;
  readonly serverTimeMsc: number;
  readonly utcOffsetMinutes: number;
}

// ---- candles ------------------------------------------------------------------------------

export const TIMEFRAMES = ['M1', 'M5', 'M15', 'M30', 'H1', 'H4', 'D1', 'W1', 'MN1'] as const;
export type Timeframe = (typeof TIMEFRAMES)[number];
/** Minutes per timeframe (MN1 nominal 43200, as MT numbers it). */
export const TIMEFRAME_MINUTES: Readonly<Record<Timeframe, number>> = {
  M1: 1,
  M5: 5,
  M15: 15,
  M30: 30,
  H1: 60,
  H4: 240,
  D1: 1440,
  W1: 10080,
  MN1: 43200,
};
export function parseTimeframe(value: string | number): Timeframe | undefined {
  if (typeof value === 'number' || /^\d+$/.test(value)) {
    const minutes = Number(value);
    return TIMEFRAMES.find((tf) => TIMEFRAME_MINUTES[tf] === minutes);
  }
  const upper = value.toUpperCase();
  return TIMEFRAMES.find((tf) => tf === upper);
}

/** Bid-based bar. Boundaries follow the broker SERVER clock (D1 opens at server midnight,
 *  W1 on Sunday server midnight, MN1 on the 1st). `time` is the UTC instant of the bar open
 *  in epoch seconds; `serverTime` is the same instant on the server clock (UTC + offset),
 *  which is what SPEC §6 CANDLE `time` carries. */
export interface Candle {
  readonly time: number;
  readonly serverTime: number;
  readonly open: number;
  readonly high: number;
  readonly low: number;
  readonly close: number;
  /** Tick count. */
  readonly ticks: number;
  readonly volume: number;
}

export interface CandleEvent {
  readonly symbol: string;
  readonly timeframe: Timeframe;
  readonly candle: Candle;
  /** true once the bar is finished (the first tick of the next bar arrived). */
  readonly closed: boolean;
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

export interface BrokerCredentials {
  readonly server: string;
  readonly login: string;
  readonly password: string;
  /** The platform the login was bound as: what a connection that learns its server only at login
   *  (the bridge) reports until then. The in-process simulator knows its servers and ignores it. */
  readonly platform?: Platform;
}

export interface OpenedOrders {
  readonly positions: readonly Position[];
  readonly orders: readonly Order[];
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

// ---- errors -------------------------------------------------------------------------------

/** Base of every error a BrokerConnection rejects with. `code` is stable for mapping. */
export class BrokerError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** The connection is down (or went down while waiting). Nothing was sent. */
export class BrokerDisconnectedError extends BrokerError {
  constructor(message = 'broker connection is not connected', options?: { cause?: unknown }) {
    super('BROKER_DISCONNECTED', message, options);
  }
}

/** No reply in time. `sent: true` means the request may have reached the broker (it was
 *  written to the socket), so a trade may or may not have executed: use lookupRequest. */
export class BrokerTimeoutError extends BrokerError {
  readonly sent: boolean;
  /** For trades: the request id the broker saw (generated by the connection if the caller
   *  gave none), to resend with or to pass to lookupRequest. */
  readonly requestId: string | undefined;
  constructor(sent: boolean, message = sent ? 'broker reply lost after send' : 'broker request timed out before send', requestId?: string) {
    super('BROKER_TIMEOUT', message);
    this.sent = sent;
    this.requestId = requestId;
  }
}

/** Wrong password or unknown login. The message never contains the password. */
export class BrokerAuthError extends BrokerError {
  constructor(message = 'invalid login or password') {
    super('BROKER_AUTH', message);
  }
}

/** The operation does not exist on this platform (e.g. balanceHistory on P4). */
export class BrokerNotSupportedError extends BrokerError {
  constructor(operation: string, platform: Platform) {
    super('BROKER_NOT_SUPPORTED', `${operation} is not supported on ${platform}`);
  }
}

/** A query argument the broker refuses (unknown symbol, bad range...). */
export class BrokerRequestError extends BrokerError {
  readonly reason: RejectReason;
  constructor(reason: RejectReason, message: string) {
    super('BROKER_REQUEST', message);
    this.reason = reason;
  }
}
