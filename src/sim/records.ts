// The records a trade writes, built from what the engine decided (tickets, prices, time): the
// deal, position and order of an opening, the order of a placed pending order, the order a P5
// position shows. Pure: SimAccount decides, commits and announces.
import { isStopLimitType, type Deal, type Order, type OrderRequest, type Side } from '../market/orders.js';
import type { StoredPosition } from './persistence.js';
import type { MarketSymbol } from './market.js';

/** What an opening is asked for: a market request, or the pending order being filled. */
export interface OpeningRequest { volume: number; magic?: number; comment?: string }

/** A market execution: the new position (`ticket`), its opening order and 'in' deal. `fromPending`
 *  is the pending order being filled (the order keeps its type; its ticket is the position id). */
export function openingRecords(
  ticket: number, dealTicket: number, s: MarketSymbol, side: Side, req: OpeningRequest,
  price: number, sl: number, tp: number, commission: number, now: number, fromPending: Order | null,
): { deal: Deal; pos: StoredPosition; order: Order } {
  const symbol = s.info.name;
  const volume = req.volume;
  const magic = req.magic ?? 0;
  const comment = req.comment ?? '';
  const deal: Deal = {
    ticket: dealTicket, order: ticket, position: ticket, symbol, type: side, entry: 'in', volume, price, timeMsc: now,
    magic, comment, commission, swap: 0, profit: 0,
  };
  const pos: StoredPosition = { ticket, symbol, type: side, volume, openPrice: price, openTimeMsc: now, sl, tp, magic, comment, commission, swapPaid: 0 };
  const order: Order = {
    kind: 'order', ticket, symbol, type: fromPending ? fromPending.type : side, state: 'filled', volume, volumeInitial: volume,
    openPrice: price, openTimeMsc: now, sl, tp, magic, comment, commission, swap: 0, profit: 0, positionId: ticket,
  };
  return { deal, pos, order };
}

/** The record of a newly placed pending order. */
export function placedOrder(ticket: number, symbol: string, req: OrderRequest & { price: number }, sl: number, tp: number, now: number): Order {
  return {
    kind: 'order', ticket, symbol, type: req.type, state: 'placed', volume: req.volume, volumeInitial: req.volume,
    openPrice: req.price, openTimeMsc: now, sl, tp,
    ...(req.stopLimitPrice !== undefined && isStopLimitType(req.type) ? { stopLimitPrice: req.stopLimitPrice } : {}),
    ...(req.expiration !== undefined ? { expiration: req.expiration } : {}),
    magic: req.magic ?? 0, comment: req.comment ?? '', commission: 0, swap: 0, profit: 0, positionId: 0,
  };
}

/** The order a P5 position answers a modify with (P5 keeps no order record for an open position). */
export function positionOrder(pos: StoredPosition, sl: number, tp: number): Order {
  return {
    kind: 'order', ticket: pos.ticket, symbol: pos.symbol, type: pos.type, state: 'filled', volume: pos.volume, volumeInitial: pos.volume,
    openPrice: pos.openPrice, openTimeMsc: pos.openTimeMsc, sl, tp, magic: pos.magic, comment: pos.comment, commission: pos.commission,
    swap: 0, profit: 0, positionId: pos.ticket,
  };
}
