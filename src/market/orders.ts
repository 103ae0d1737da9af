// The trading vocabulary: order types, trade requests, orders, positions, deals, and the
// broker's return codes. Plain data (see ./server.ts for the time convention).

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
/** An order type's MT5 code: its index in ORDER_TYPES. */
export type OrderTypeCode = NumberOf<Exclude<keyof typeof ORDER_TYPES, keyof readonly unknown[]>>;
type NumberOf<K> = K extends `${infer N extends number}` ? N : never;
/** What `parseOrderType` reads: a name (any case: BuyLimit, buylimit) or its code, as a number or digits. */
export type OrderTypeInput = OrderType | Lowercase<OrderType> | OrderTypeCode | `${OrderTypeCode}`;

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
  return TYPE_BY_NAME.get(value) ?? TYPE_BY_NAME.get(value.toLowerCase());
}
/** Each type by its name and its lower-case name: a lookup, not a lower-cased copy of every name per call. */
const TYPE_BY_NAME = new Map<string, OrderType>(ORDER_TYPES.flatMap((t) => [[t, t], [t.toLowerCase(), t]] as const));

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

export interface OpenedOrders {
  readonly positions: readonly Position[];
  readonly orders: readonly Order[];
}
