// The trade requests as schemas, one per operation: what every route family and the shard agree an
// order is. The classic routes' query arguments reach the account's shard and are read there with
// TRADE_SCHEMAS (the shard checks what crosses the thread); /v1/proxy reads its two dialects into
// SendArgs and checks them with checkOrder, before anything reaches the shard or the broker.
import { z } from 'zod';
import { isMarketType, isStopLimitType, parseOrderType, type OrderType } from './orders.js';

/** The trade operations of the classic routes (SPEC §4.1). */
export const TRADE_OPS = ['OrderSend', 'OrderModify', 'OrderClose', 'OrderDelete', 'OrderCloseBy'] as const;
export type TradeOp = (typeof TRADE_OPS)[number];

/** A point in time as the shard needs it: wall-clock ms on the server clock, or an exact UTC instant. */
export type TimeArg = { serverMs: number } | { utcMs: number };

// ---- the classic trade operations (args of the shard's 'account.trade') -----------------------

/** A number, also from its decimal text. */
const num = () => z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' ? Number(v) : v), z.number().finite());
const text = () => z.string();
/** A ticket: a positive integer, also as digits. */
const ticket = () =>
  z.unknown().transform((v, ctx) => {
    const s = typeof v === 'number' ? String(v) : typeof v === 'string' ? v.trim() : '';
    const n = /^\d+$/.test(s) ? Number(s) : NaN;
    if (Number.isSafeInteger(n) && n > 0) return n;
    ctx.addIssue({ code: 'custom', message: 'must be a positive integer' });
    return z.NEVER;
  });
const orderType = () =>
  z.unknown().transform((v, ctx): OrderType => {
    if (v === undefined) {
      ctx.addIssue({ code: 'custom', message: 'is required (Buy, Sell, BuyLimit, ... or the numeric code)' });
      return z.NEVER;
    }
    const type = typeof v === 'string' || typeof v === 'number' ? parseOrderType(v) : undefined;
    if (!type) {
      ctx.addIssue({ code: 'custom', message: `unknown order type ${String(v)}` });
      return z.NEVER;
    }
    return type;
  });

/** OrderSend: `operation` (name or code) becomes `type`; `lots` is an alias of `volume`. */
const orderSend = z
  .object({
    operation: orderType(),
    symbol: z.string({ error: 'is required' }).min(1, 'is required'),
    volume: num().optional(), lots: num().optional(),
    price: num().optional(), slippage: num().optional(), stoploss: num().optional(), takeprofit: num().optional(),
    comment: text().optional(), magic: num().optional(), expiration: num().optional(), stopLimitPrice: num().optional(),
  })
  .transform(({ operation: type, volume, lots, ...rest }, ctx) => {
    const v = volume ?? lots;
    if (v === undefined || !(v > 0)) ctx.addIssue({ code: 'custom', path: ['volume'], message: 'must be a positive number' });
    if (!isMarketType(type) && rest.price === undefined) ctx.addIssue({ code: 'custom', path: ['price'], message: `is required for ${type} orders` });
    // Fields that belong to another kind of order are refused, as /v1/proxy's checkOrder does, not
    // dropped: a BuyStop meant as a BuyStopLimit would otherwise fill at market once triggered.
    if (rest.stopLimitPrice !== undefined && !isStopLimitType(type)) ctx.addIssue({ code: 'custom', path: ['stopLimitPrice'], message: `only for stop-limit orders, not ${type}` });
    if (rest.expiration !== undefined && isMarketType(type)) ctx.addIssue({ code: 'custom', path: ['expiration'], message: `only for pending orders, not ${type}` });
    return { ...rest, type, volume: v ?? 0 };
  });

/** What TRADE_SCHEMAS.OrderSend reads an order into. */
export type OrderSendArgs = z.output<typeof orderSend>;

/** OrderSend's optional fields after `symbol`, in the schema's order (the order its output keeps). */
const SEND_NUMBERS = ['price', 'slippage', 'stoploss', 'takeprofit'] as const;
const SEND_NUMBERS_AFTER = ['magic', 'expiration', 'stopLimitPrice'] as const;

/**
 * TRADE_SCHEMAS.OrderSend's output, read without zod for arguments already in their types (as the
 * classic routes send them: numbers as numbers): zod's object, preprocess and transform steps were
 * ~3 us of the shard per order. Anything else (text numbers, a missing or bad field, a rule broken)
 * is undefined, and the schema reads it, with its errors. Same keys in the same order as the
 * schema's output (test/unit/order-schemas-quick.property.test.ts).
 */
export function quickOrderSend(a: Record<string, unknown>): OrderSendArgs | undefined {
  if (Object.getPrototypeOf(a) !== Object.prototype) return undefined;
  const op = a.operation;
  const type = typeof op === 'string' || typeof op === 'number' ? parseOrderType(op) : undefined;
  const symbol = a.symbol;
  if (type === undefined || typeof symbol !== 'string' || symbol === '') return undefined;
  const volume = a.volume ?? a.lots;
  if (!isFiniteOrAbsent(a, 'volume') || !isFiniteOrAbsent(a, 'lots') || !((volume as number) > 0)) return undefined;
  const out: Record<string, unknown> = { symbol };
  for (const k of SEND_NUMBERS) {
    if (!(k in a)) continue;
    if (!isFiniteOrAbsent(a, k)) return undefined;
    out[k] = a[k];
  }
  if ('comment' in a) {
    if (a.comment !== undefined && typeof a.comment !== 'string') return undefined;
    out.comment = a.comment;
  }
  for (const k of SEND_NUMBERS_AFTER) {
    if (!(k in a)) continue;
    if (!isFiniteOrAbsent(a, k)) return undefined;
    out[k] = a[k];
  }
  // The schema's rules: a pending order has a price, a market order no expiration, and only a
  // stop-limit order a stopLimitPrice.
  if (isMarketType(type) ? out.expiration !== undefined : out.price === undefined) return undefined;
  if (out.stopLimitPrice !== undefined && !isStopLimitType(type)) return undefined;
  out.type = type;
  out.volume = volume;
  return out as OrderSendArgs;
}

/** The field is a finite number, or undefined (absent, or present as undefined). */
const isFiniteOrAbsent = (a: Record<string, unknown>, k: string) => a[k] === undefined || (typeof a[k] === 'number' && Number.isFinite(a[k]));

/** Each classic trade operation's arguments, read into the BrokerConnection request it becomes. */
export const TRADE_SCHEMAS = {
  OrderSend: orderSend,
  OrderModify: z.object({
    ticket: ticket(), stoploss: num().optional(), takeprofit: num().optional(), price: num().optional(),
    expiration: num().optional(), stopLimitPrice: num().optional(),
  }),
  OrderClose: z
    .object({ ticket: ticket(), lots: num().optional(), volume: num().optional(), price: num().optional(), slippage: num().optional(), comment: text().optional() })
    .transform(({ volume, lots, ...rest }) => ({ ...rest, ...((lots ?? volume) !== undefined ? { lots: lots ?? volume } : {}) })),
  OrderDelete: z.object({ ticket: ticket() }),
  OrderCloseBy: z.object({ ticket: ticket(), byTicket: ticket(), comment: text().optional() }),
} satisfies Record<TradeOp, z.ZodType>;

// ---- /v1/proxy order sends (both dialects read into SendArgs) ----------------------------------

export interface SendArgs {
  symbol: string;
  type: OrderType;
  volume: number;
  price?: number | undefined;
  slippage?: number | undefined;
  stoploss?: number | undefined;
  takeprofit?: number | undefined;
  comment?: string | undefined;
  magic?: number | undefined;
  stopLimitPrice?: number | undefined;
  expiration?: TimeArg | undefined;
  expirationType?: number | undefined;
  placedType?: string | number | undefined;
}

/** Consistency checks of an order that need no market data (prices on the right side, fields that belong). */
export function checkOrder(o: SendArgs, ctx: z.RefinementCtx): void {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  const market = isMarketType(o.type);
  const buy = o.type.startsWith('Buy');
  if (!market && o.price === undefined) issue('price', `required for a ${o.type} order`);
  if (isStopLimitType(o.type)) {
    if (o.stopLimitPrice === undefined) issue('stopLimitPrice', `required for a ${o.type} order`);
    else if (o.price !== undefined && (buy ? o.stopLimitPrice > o.price : o.stopLimitPrice < o.price)) {
      issue('stopLimitPrice', buy ? 'must not be above price for BuyStopLimit' : 'must not be below price for SellStopLimit');
    }
  } else if (o.stopLimitPrice !== undefined) issue('stopLimitPrice', 'only for stop-limit orders');
  if (market && o.expiration !== undefined) issue('expiration', 'only for pending orders');
  if (market && o.expirationType !== undefined && o.expirationType !== EXPIRATION_GTC) issue('expirationType', 'only for pending orders (0, good till cancelled, is what a market order is)');
  checkExpirationType(o.expirationType, o.expiration !== undefined, issue);
  const ref = o.type === 'BuyStopLimit' || o.type === 'SellStopLimit' ? o.stopLimitPrice : o.price;
  if (ref !== undefined) {
    if (o.stoploss && (buy ? o.stoploss >= ref : o.stoploss <= ref)) issue('stoploss', `must be ${buy ? 'below' : 'above'} the ${market ? 'price' : 'order price'} for a ${buy ? 'buy' : 'sell'}`);
    if (o.takeprofit && (buy ? o.takeprofit <= ref : o.takeprofit >= ref)) issue('takeprofit', `must be ${buy ? 'above' : 'below'} the ${market ? 'price' : 'order price'} for a ${buy ? 'buy' : 'sell'}`);
  }
}

/** MT5's order time types (ENUM_ORDER_TYPE_TIME), the codes of `expirationType` (SPEC §4.4 leaves them
 *  unshown): good till cancelled, the end of today, the time given, the end of the day given (both
 *  days on the broker server's calendar). */
export const EXPIRATION_GTC = 0;
export const EXPIRATION_DAY = 1;
export const EXPIRATION_SPECIFIED = 2;
export const EXPIRATION_SPECIFIED_DAY = 3;

/** An expirationType and whether an expiration came with it agree: 2 and 3 need one, 0 and 1 take none. */
export function checkExpirationType(type: number | undefined, hasExpiration: boolean, issue: (path: string, message: string) => void): void {
  if (type === undefined) return;
  const needs = type === EXPIRATION_SPECIFIED || type === EXPIRATION_SPECIFIED_DAY;
  if (needs && !hasExpiration) issue('expiration', `required with expirationType ${type} (${type === EXPIRATION_SPECIFIED ? 'the time given' : 'the end of the day given'})`);
  if (!needs && hasExpiration) issue('expirationType', `${type} (${type === EXPIRATION_GTC ? 'good till cancelled' : 'the end of today'}) takes no expiration: use 2 (the time given) or 3 (the end of the day given)`);
}
