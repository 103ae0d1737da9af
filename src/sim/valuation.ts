// What an account's positions are worth at the market's current prices: floating profit, accrued
// swap, margin, the account summary and the Position records the broker interface shows. Pure.
import type { AccountSummary } from '../market/account.js';
import type { Position } from '../market/orders.js';
import { closePrice, marginFor, profitFor, round2, swapFor, swapNights } from './accounting.js';
import type { Market } from './market.js';
import type { StoredAccount, StoredPosition } from './persistence.js';

const sym = (market: Market, name: string) => market.bySymbol.get(name)!;

function sameServerDay(market: Market, utcMs: number): boolean {
  const c = market.clock;
  return Math.floor(c.toServer(utcMs) / 86_400_000) === Math.floor(c.toServer(market.now) / 86_400_000);
}

/** Swap accrued since the position opened, less what partial closes realized already. */
export function positionSwap(market: Market, account: StoredAccount, p: StoredPosition): number {
  if (p.swapPaid === 0 && sameServerDay(market, p.openTimeMsc)) return 0;
  const s = sym(market, p.symbol);
  const nights = swapNights(p.openTimeMsc, market.now, (t) => market.clock.toServer(t));
  return round2(swapFor(market, s.info, p.type, p.volume, nights, account.currency) - p.swapPaid);
}

export function positionProfit(market: Market, account: StoredAccount, p: StoredPosition): number {
  const s = sym(market, p.symbol);
  return round2(profitFor(market, s.info, p.type, p.volume, p.openPrice, closePrice(market, s, p.type), account.currency));
}

export function positionMargin(market: Market, account: StoredAccount, p: StoredPosition): number {
  const s = sym(market, p.symbol);
  return marginFor(market, s.info, p.volume, p.openPrice, account.leverage, account.currency);
}

export function accountSummary(market: Market, account: StoredAccount, positions: Iterable<StoredPosition>): AccountSummary {
  let profit = 0;
  let margin = 0;
  for (const p of positions) {
    profit += positionProfit(market, account, p) + positionSwap(market, account, p);
    margin += positionMargin(market, account, p);
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

export function positionView(market: Market, account: StoredAccount, p: StoredPosition): Position {
  const s = sym(market, p.symbol);
  return {
    kind: 'position',
    ticket: p.ticket,
    symbol: p.symbol,
    type: p.type,
    volume: p.volume,
    openPrice: p.openPrice,
    openTimeMsc: p.openTimeMsc,
    currentPrice: closePrice(market, s, p.type),
    sl: p.sl,
    tp: p.tp,
    magic: p.magic,
    comment: p.comment,
    commission: p.commission,
    swap: positionSwap(market, account, p),
    profit: positionProfit(market, account, p),
  };
}
