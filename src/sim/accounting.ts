// Pure money formulas (documented in docs/simulator.md). Currency conversion to the
// account currency uses the current bid of the XXXUSD pair, or 1/ask of USDXXX.
import type { Side } from '../market/orders.js';
import type { SymbolInfo } from '../market/symbols.js';
import type { Market, MarketSymbol } from './market.js';

const DAY = 86_400_000;

/** Multiplier converting an amount in `currency` into `account` currency, or NaN. */
export function conversionRate(market: Market, currency: string, account: string): number {
  if (currency === account) return 1;
  const direct = market.bySymbol.get(currency + account);
  if (direct) return market.bid(direct);
  const inverse = market.bySymbol.get(account + currency);
  if (inverse) return 1 / market.ask(inverse);
  return NaN;
}

/** Margin of `volume` lots at `price`, in account currency:
 *  Forex:       volume * contractSize / leverage            (margin currency)
 *  CFD:         volume * contractSize * price               (profit currency)
 *  CFDLeverage: volume * contractSize * price / leverage    (profit currency)
 *  marginInitial > 0: volume * marginInitial                (margin currency)
 *  all times marginRate, then converted. */
export function marginFor(market: Market, info: SymbolInfo, volume: number, price: number, leverage: number, account: string): number {
  return marginAt(info, volume, price, leverage, conversionRate(market, marginCurrencyOf(info), account));
}

/** The currency marginFor computes in before converting: the margin currency, or the profit
 *  currency for the price-based modes. */
export function marginCurrencyOf(info: SymbolInfo): string {
  return info.marginInitial > 0 || info.marginCalcMode === 'Forex' ? info.marginCurrency : info.currency;
}

/** marginFor with the conversion rate of marginCurrencyOf(info) given. */
export function marginAt(info: SymbolInfo, volume: number, price: number, leverage: number, rate: number): number {
  let amount: number;
  if (info.marginInitial > 0) amount = volume * info.marginInitial;
  else if (info.marginCalcMode === 'Forex') amount = (volume * info.contractSize) / leverage;
  else if (info.marginCalcMode === 'CFD') amount = volume * info.contractSize * price;
  else amount = (volume * info.contractSize * price) / leverage;
  return amount * info.marginRate * rate;
}

/** marginFor over several positions of one symbol at once, from their total lots and their total
 *  lots x open price (the formula is linear in both): equal to the sum of marginFor per position
 *  up to float rounding. */
export function marginOfTotals(market: Market, info: SymbolInfo, lots: number, lotsTimesPrice: number, leverage: number, account: string): number {
  let amount: number;
  if (info.marginInitial > 0) amount = lots * info.marginInitial;
  else if (info.marginCalcMode === 'Forex') amount = (lots * info.contractSize) / leverage;
  else amount = (lotsTimesPrice * info.contractSize) / (info.marginCalcMode === 'CFD' ? 1 : leverage);
  return amount * info.marginRate * conversionRate(market, marginCurrencyOf(info), account);
}

/** Profit of `volume` lots from open to close, in account currency. */
export function profitFor(market: Market, info: SymbolInfo, side: Side, volume: number, open: number, close: number, account: string): number {
  return profitAt(info, side, volume, open, close, conversionRate(market, info.currency, account));
}

/** profitFor with the profit currency's conversion rate given. */
export function profitAt(info: SymbolInfo, side: Side, volume: number, open: number, close: number, rate: number): number {
  const diff = side === 'Buy' ? close - open : open - close;
  return diff * volume * info.contractSize * rate;
}

/** The price a position of this side closes at. */
export function closePrice(market: Market, s: MarketSymbol, side: Side): number {
  return side === 'Buy' ? market.bid(s) : market.ask(s);
}
export function openPrice(market: Market, s: MarketSymbol, side: Side): number {
  return side === 'Buy' ? market.ask(s) : market.bid(s);
}

/** Weight of the rollover at the start of server day `d` (days since the epoch; day 0 was a
 *  Thursday): Tuesday..Saturday 1, Thursday 3 (the weekend), Sunday and Monday 0. */
const ROLLOVER_PREFIX = [3, 4, 5, 5, 5, 6, 7]; // cumulative weights of d mod 7 = 0 (Thu) .. 6 (Wed)

/** Swap charges from a fixed origin up to and including server day `d`: the nights between two
 *  days are the difference of their indexes, so a sum over positions is linear in the open days. */
export function rolloverIndex(d: number): number {
  const w = Math.floor(d / 7);
  return 7 * w + ROLLOVER_PREFIX[d - 7 * w]!;
}

/** A broker server's clock (market.clock): UTC to server-clock epoch ms. */
export interface ToServer {
  toServer(utcMs: number): number;
}

/** Server day (days since the epoch on the server clock) of a UTC instant. */
export function serverDay(utcMs: number, clock: ToServer): number {
  return Math.floor(clock.toServer(utcMs) / DAY);
}

/** Number of swap charges between two UTC instants: one per server-clock rollover at the
 *  start of Tuesday..Saturday, the one at the start of Thursday counting three times
 *  (the weekend), as MT brokers do. */
export function swapNights(openUtc: number, nowUtc: number, toServer: (utc: number) => number): number {
  const d0 = Math.floor(toServer(openUtc) / DAY);
  const d1 = Math.floor(toServer(nowUtc) / DAY);
  return d1 > d0 ? rolloverIndex(d1) - rolloverIndex(d0) : 0;
}

/** Swap in account currency: nights * swap points * point * contractSize * volume. */
export function swapFor(market: Market, info: SymbolInfo, side: Side, volume: number, nights: number, account: string): number {
  if (nights === 0) return 0;
  return swapAt(info, side, volume, nights, conversionRate(market, info.currency, account));
}

/** swapFor with the profit currency's conversion rate given. */
export function swapAt(info: SymbolInfo, side: Side, volume: number, nights: number, rate: number): number {
  if (nights === 0) return 0;
  const pts = side === 'Buy' ? info.swapLong : info.swapShort;
  return nights * pts * info.point * info.contractSize * volume * rate;
}

export function round2(v: number): number {
  return Math.round(v * 100) / 100;
}

/** Is `volume` a valid lot size for the symbol (min, max, step)? */
export function validVolume(info: SymbolInfo, volume: number): boolean {
  if (!(volume >= info.volumeMin - 1e-9) || volume > info.volumeMax + 1e-9) return false;
  const steps = volume / info.volumeStep;
  return Math.abs(steps - Math.round(steps)) < 1e-6;
}
