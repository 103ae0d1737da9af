// What an account's positions are worth at the market's current prices: floating profit, accrued
// swap, margin, the account summary and the Position records the broker interface shows. Pure.
import type { AccountSummary } from '../market/account.js';
import type { Position } from '../market/orders.js';
import {
  closePrice, conversionRate, marginAt, marginCurrencyOf, marginOfTotals, profitAt, rolloverIndex, round2, serverDay, swapAt,
} from './accounting.js';
import type { Market, MarketSymbol } from './market.js';
import type { StoredAccount, StoredPosition } from './persistence.js';
import type { PositionBook } from './positionBook.js';

const sym = (market: Market, name: string) => market.bySymbol.get(name)!;

/**
 * Values one account's positions at the market's current prices. What is the same for every
 * position of a symbol (the quote, the conversion rates) and the server day are looked up once:
 * the account summary values every position (25 us at 100 positions with the lookups per position).
 * Same formulas, same order of operations as accounting.ts, so the same figures to the bit.
 */
export class Valuer {
  private name = '';
  private s: MarketSymbol | undefined;
  private rate = 0;
  private marginRate = 0;
  private readonly today: number;

  constructor(
    private readonly market: Market,
    private readonly account: StoredAccount,
  ) {
    this.today = serverDay(market.now, market.clock);
  }

  /** Rates of the symbols met so far, by symbol index: positions of several symbols interleave. */
  private readonly rates: ([number, number] | undefined)[] = [];

  private at(symbol: string): MarketSymbol {
    if (symbol !== this.name || this.s === undefined) {
      const s = sym(this.market, symbol);
      const cur = this.account.currency;
      const r = (this.rates[s.index] ??= [conversionRate(this.market, s.info.currency, cur), conversionRate(this.market, marginCurrencyOf(s.info), cur)]);
      this.name = symbol;
      this.s = s;
      this.rate = r[0];
      this.marginRate = r[1];
    }
    return this.s;
  }

  /** Swap accrued since the position opened, less what partial closes realized already. */
  swap(p: StoredPosition): number {
    const s = this.at(p.symbol);
    const opened = serverDay(p.openTimeMsc, this.market.clock);
    if (p.swapPaid === 0 && opened === this.today) return 0;
    const nights = this.today > opened ? rolloverIndex(this.today) - rolloverIndex(opened) : 0; // swapNights
    return round2(swapAt(s.info, p.type, p.volume, nights, this.rate) - p.swapPaid);
  }

  profit(p: StoredPosition): number {
    const s = this.at(p.symbol);
    return round2(profitAt(s.info, p.type, p.volume, p.openPrice, closePrice(this.market, s, p.type), this.rate));
  }

  margin(p: StoredPosition): number {
    return marginAt(this.at(p.symbol).info, p.volume, p.openPrice, this.account.leverage, this.marginRate);
  }

  view(p: StoredPosition): Position {
    const s = this.at(p.symbol);
    return {
      kind: 'position', ticket: p.ticket, symbol: p.symbol, type: p.type, volume: p.volume, openPrice: p.openPrice,
      openTimeMsc: p.openTimeMsc, currentPrice: closePrice(this.market, s, p.type), sl: p.sl, tp: p.tp, magic: p.magic,
      comment: p.comment, commission: p.commission, swap: this.swap(p), profit: this.profit(p),
    };
  }
}

export function positionSwap(market: Market, account: StoredAccount, p: StoredPosition): number {
  return new Valuer(market, account).swap(p);
}

export function positionProfit(market: Market, account: StoredAccount, p: StoredPosition): number {
  return new Valuer(market, account).profit(p);
}

export function positionView(market: Market, account: StoredAccount, p: StoredPosition): Position {
  return new Valuer(market, account).view(p);
}

export function accountSummary(market: Market, account: StoredAccount, positions: Iterable<StoredPosition>): AccountSummary {
  const v = new Valuer(market, account);
  let profit = 0;
  let margin = 0;
  for (const p of positions) {
    profit += v.profit(p) + v.swap(p);
    margin += v.margin(p);
  }
  const equity = account.balance + account.credit + profit;
  margin = round2(margin);
  return {
    balance: account.balance,
    credit: account.credit,
    equity: round2(equity),
    profit: round2(profit),
    margin,
    freeMargin: round2(equity - margin),
    marginLevel: margin > 0 ? round2((equity / margin) * 100) : 0,
    leverage: account.leverage,
    currency: account.currency,
  };
}

/** An account's equity and margin from its book's running totals, in O(symbols held): what
 *  accountSummary gives before it rounds (each position's profit and swap to the cent, then the
 *  totals), and `slack`, how far the two can differ (half a cent per rounded figure, plus float
 *  rounding, generously). null where the totals do not apply: a position opened on a later server
 *  day than the instant valued (another symbol's tick earlier in the same segment window), or a
 *  price or conversion rate missing. */
export interface Funds {
  readonly equity: number;
  readonly margin: number;
  readonly slack: number;
}

export function fundsEstimate(market: Market, account: StoredAccount, book: PositionBook): Funds | null {
  const day = serverDay(market.now, market.clock);
  if (book.size > 0 && day < book.maxOpenDay) return null;
  const rNow = rolloverIndex(day);
  let floating = 0;
  let margin = 0;
  let scale = Math.abs(account.balance) + Math.abs(account.credit);
  for (const [name, t] of book.totals) {
    const b = t.buy;
    const se = t.sell;
    if (b.n + se.n === 0) continue;
    const s = sym(market, name);
    const info = s.info;
    const perPrice = info.contractSize * conversionRate(market, info.currency, account.currency);
    const bid = market.bid(s);
    const ask = market.ask(s);
    const perNight = info.point * perPrice;
    const swapBuy = info.swapLong * perNight * (rNow * b.lots - b.lotsRollover);
    const swapSell = info.swapShort * perNight * (rNow * se.lots - se.lotsRollover);
    const m = marginOfTotals(market, info, b.lots + se.lots, b.lotsOpen + se.lotsOpen, account.leverage, account.currency);
    floating += (bid * b.lots - b.lotsOpen + (se.lotsOpen - ask * se.lots)) * perPrice + swapBuy + swapSell - b.swapPaid - se.swapPaid;
    margin += m;
    scale += (Math.abs(bid * b.lots) + Math.abs(b.lotsOpen) + Math.abs(ask * se.lots) + Math.abs(se.lotsOpen)) * Math.abs(perPrice)
      + Math.abs(swapBuy) + Math.abs(swapSell) + Math.abs(b.swapPaid) + Math.abs(se.swapPaid) + Math.abs(m);
  }
  const equity = account.balance + account.credit + floating;
  if (!Number.isFinite(equity) || !Number.isFinite(margin) || !Number.isFinite(scale)) return null;
  return { equity, margin, slack: 0.01 * book.size + 0.011 + 1e-9 * scale };
}

/** Would accountSummary's free margin less `extra` be at least 0 (not negative)? From the running
 *  totals when they decide it beyond their slack; else the full valuation decides, so the answer is
 *  always the one the full summary gives. */
export function affords(market: Market, account: StoredAccount, book: PositionBook, extra: number): boolean {
  const f = fundsEstimate(market, account, book);
  if (f) {
    const free = f.equity - f.margin - extra;
    if (free - f.slack >= 0) return true;
    if (free + f.slack < 0) return false;
  }
  const sum = accountSummary(market, account, book.values());
  return !(sum.equity - sum.margin - extra < 0);
}

/** Is the account certainly clear of stop-out (no margin, or a margin level at or above `stopOut`
 *  whatever the rounding)? false means: ask the full summary. */
export function clearOfStopOut(market: Market, account: StoredAccount, book: PositionBook, stopOut: number): boolean {
  if (book.size === 0) return true;
  const f = fundsEstimate(market, account, book);
  if (!f) return false;
  const eLow = f.equity - f.slack;
  const mLow = f.margin - f.slack;
  return mLow > 0 && eLow >= 0 && (eLow / (f.margin + f.slack)) * 100 >= stopOut + 0.01;
}
