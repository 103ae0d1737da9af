// The order engine's checks that need only the market and the symbol: trading allowed now, prices
// on the symbol's grid, SL/TP and pending entry distances (MT rules). Pure; rejections are values.
import {
  isStopLimitType, RETCODES, sideOf, type ModifyRequest, type Order, type OrderRequest, type OrderType, type RejectReason, type Side,
  type TradeResult,
} from '../market/orders.js';
import { LATEST_TIME_MS } from '../market/serverClock.js';
import type { Market, MarketSymbol } from './market.js';

export function reject(reason: RejectReason, message: string): TradeResult {
  return { ok: false, reason, message, retcode: RETCODES[reason] };
}

export function marketGate(market: Market, now: number, s: MarketSymbol, side: Side | null): TradeResult | null {
  const mode = s.info.tradeMode;
  if (mode === 'Disabled') return reject('TRADE_DISABLED', `trading is disabled for ${s.info.name}`);
  if (side !== null) {
    if (mode === 'CloseOnly') return reject('TRADE_DISABLED', `${s.info.name} is close-only`);
    if (mode === 'LongOnly' && side === 'Sell') return reject('TRADE_DISABLED', `${s.info.name} is long-only`);
    if (mode === 'ShortOnly' && side === 'Buy') return reject('TRADE_DISABLED', `${s.info.name} is short-only`);
  }
  if (s.feed.timeMsc < 0) return reject('NO_QUOTES', `no quotes for ${s.info.name}`);
  if (!market.tradeOpenAt(s, now)) return reject('MARKET_CLOSED', `market is closed for ${s.info.name}`);
  return null;
}

/** SL/TP distance rule relative to the price the position would close at (or, for a
 *  pending order, its entry price). 0 means "no level". */
export function stopsValid(s: MarketSymbol, side: Side, ref: number, sl: number, tp: number): boolean {
  const d = s.info.stopsLevel * s.point - 1e-9;
  if (side === 'Buy') return (sl === 0 || sl < ref - d) && (tp === 0 || tp > ref + d);
  return (sl === 0 || sl > ref + d) && (tp === 0 || tp < ref - d);
}

/** Entry price relation of a pending order to the market (MT rules), stopsLevel apart. */
export function pendingPriceValid(market: Market, s: MarketSymbol, type: OrderType, price: number): boolean {
  const d = s.info.stopsLevel * s.point - 1e-9;
  const bid = market.bid(s);
  const ask = market.ask(s);
  switch (type) {
    case 'BuyLimit':
      return price < ask - d;
    case 'SellLimit':
      return price > bid + d;
    case 'BuyStop':
    case 'BuyStopLimit':
      return price > ask + d;
    case 'SellStop':
    case 'SellStopLimit':
      return price < bid - d;
    default:
      return false;
  }
}

/** On the symbol's price grid: no more decimals than `digits` (a broker normalizes or refuses the rest). */
export function onGrid(s: MarketSymbol, v: number): boolean {
  const scaled = v * 10 ** s.info.digits;
  // Tolerance: the rounding error of v * 10^digits in binary floating point, nothing more.
  return Math.abs(scaled - Math.round(scaled)) < 1e-9 + Math.abs(scaled) * 1e-12;
}

/** The first of `prices` (0 = none) off the symbol's grid, as a rejection. */
export function offGrid(s: MarketSymbol, prices: Array<[string, number | undefined]>): TradeResult | null {
  for (const [name, v] of prices) {
    if (v !== undefined && v !== 0 && !onGrid(s, v)) {
      return reject(name === 'stoploss' || name === 'takeprofit' ? 'INVALID_STOPS' : 'INVALID_PRICE', `${name} ${v} has more than ${s.info.digits} decimals (${s.info.name})`);
    }
  }
  return null;
}

export function validPrice(v: number | undefined): v is number {
  return v !== undefined && Number.isFinite(v) && v > 0;
}

/** SL and TP are prices or 0 (none): never negative, never NaN or infinite. */
export function stopsSane(sl: number, tp: number): boolean {
  return sl >= 0 && tp >= 0 && Number.isFinite(sl) && Number.isFinite(tp);
}

/** A stop-limit's limit price lies at or beyond its stop price, away from the market (MT rules). */
export function stopLimitSideOk(side: Side, stop: number, limit: number): boolean {
  return side === 'Buy' ? limit <= stop : limit >= stop;
}

export function round8(v: number): number {
  return Math.round(v * 1e8) / 1e8;
}
/** An expiration is a future time with a calendar date (up to the end of year 9999). */
export function validExpiration(ms: number, now: number): boolean {
  return Number.isFinite(ms) && ms > now && ms <= LATEST_TIME_MS;
}
export function expirationProblem(ms: number): string {
  return Number.isFinite(ms) && ms <= LATEST_TIME_MS ? 'expiration is in the past' : 'expiration is not a valid time';
}

/** What a tick does to a pending order: nothing, fill it (limit and stop orders), or turn a
 *  stop-limit whose stop price was reached into a limit order at its stopLimitPrice. */
export function pendingTrigger(o: Order, bid: number, ask: number): 'none' | 'fill' | 'toLimit' {
  switch (o.type) {
    case 'BuyLimit': return ask <= o.openPrice ? 'fill' : 'none';
    case 'SellLimit': return bid >= o.openPrice ? 'fill' : 'none';
    case 'BuyStop': return ask >= o.openPrice ? 'fill' : 'none';
    case 'SellStop': return bid <= o.openPrice ? 'fill' : 'none';
    case 'BuyStopLimit': return ask >= o.openPrice ? 'toLimit' : 'none';
    case 'SellStopLimit': return bid <= o.openPrice ? 'toLimit' : 'none';
    default: return 'none';
  }
}

/** A new pending order's prices, stops and expiration against the market (`sl`/`tp`: 0 = none). */
export function pendingEntryProblem(market: Market, now: number, s: MarketSymbol, req: OrderRequest, sl: number, tp: number): TradeResult | null {
  const side = sideOf(req.type);
  if (!validPrice(req.price)) return reject('INVALID_PRICE', 'a pending order needs a price');
  if (!pendingPriceValid(market, s, req.type, req.price)) {
    return reject('INVALID_PRICE', `invalid ${req.type} price ${req.price} (bid ${market.bid(s)}, ask ${market.ask(s)})`);
  }
  let entry = req.price;
  if (isStopLimitType(req.type)) {
    const lim = req.stopLimitPrice;
    if (!validPrice(lim)) return reject('INVALID_PRICE', 'a stop-limit order needs stopLimitPrice');
    if (!stopLimitSideOk(side, req.price, lim)) return reject('INVALID_PRICE', 'stopLimitPrice is on the wrong side of the stop price');
    entry = lim;
  }
  if (!stopsValid(s, side, entry, sl, tp)) return reject('INVALID_STOPS', `stops must be at least ${s.info.stopsLevel} points from the entry price`);
  if (req.expiration !== undefined && !validExpiration(req.expiration, now)) return reject('INVALID_EXPIRATION', expirationProblem(req.expiration));
  return null;
}

/** A pending order's modification, checked: its new levels, or the rejection. */
export function pendingChangeProblem(
  market: Market, now: number, s: MarketSymbol, o: Order, req: ModifyRequest,
): TradeResult | { price: number; lim: number | undefined; sl: number; tp: number } {
  const price = req.price ?? o.openPrice;
  const side = sideOf(o.type);
  if (!validPrice(price) || (req.price !== undefined && !pendingPriceValid(market, s, o.type, price))) return reject('INVALID_PRICE', `invalid price ${price}`);
  const lim = req.stopLimitPrice ?? o.stopLimitPrice;
  const entry = isStopLimitType(o.type) && lim !== undefined ? lim : price;
  const sl = req.stoploss ?? o.sl;
  const tp = req.takeprofit ?? o.tp;
  if (!stopsSane(sl, tp)) return reject('INVALID_STOPS', 'invalid stop loss or take profit');
  if (isStopLimitType(o.type) && lim !== undefined) {
    // The same rule as when it was placed: the limit price on the far side of the stop price.
    if (!validPrice(lim)) return reject('INVALID_PRICE', `invalid stopLimitPrice ${lim}`);
    if (!stopLimitSideOk(side, price, lim)) return reject('INVALID_PRICE', 'stopLimitPrice is on the wrong side of the stop price');
  }
  const grid = offGrid(s, [['price', price], ['stopLimitPrice', isStopLimitType(o.type) ? lim : undefined], ['stoploss', sl], ['takeprofit', tp]]);
  if (grid) return grid;
  if (!stopsValid(s, side, entry, sl, tp)) return reject('INVALID_STOPS', `stops must be at least ${s.info.stopsLevel} points from the entry price`);
  if (req.expiration !== undefined && req.expiration !== 0 && !validExpiration(req.expiration, now)) return reject('INVALID_EXPIRATION', expirationProblem(req.expiration));
  return { price, lim, sl, tp };
}
