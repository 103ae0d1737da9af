// The JSON payloads of the market and account frames (QUOTE, CANDLE, POSITIONS, ORDERS, TRADE; SPEC §6),
// serialized once wherever the data arrives: in the shard for the /ws gateway socket
// (hosts/sessionFrames.ts), on the main thread for /v1/stream (src/stream/). Times come twice: on the
// broker server clock (no zone) and in UTC.
import type { ServerClock } from '../market/serverClock.js';
import type { Deal, Order, Position } from '../market/orders.js';
import type { Tick } from '../market/server.js';
import type { CandleEvent } from '../market/timeframes.js';

/** Server-clock ms as ISO 8601 without a zone (it is not UTC). */
export function serverIso(serverMs: number): string {
  return new Date(serverMs).toISOString().slice(0, 23);
}

export function quoteData(tick: Tick, clock: ServerClock, nowMs: number): string {
  const s = clock.toServer(tick.timeMsc);
  // Field order is fixed and stable; ageMs is the age of the quote when this frame was written.
  return JSON.stringify({
    symbol: tick.symbol,
    bid: tick.bid,
    ask: tick.ask,
    time: serverIso(s),
    timeMsc: s,
    timeUtc: new Date(tick.timeMsc).toISOString(),
    timeMscUtc: tick.timeMsc,
    ageMs: Math.max(0, Math.round(nowMs - tick.timeMsc)),
    ...(tick.volume !== undefined ? { volume: tick.volume } : {}),
  });
}

export function candleData(ev: CandleEvent, partial: boolean): string {
  const c = ev.candle;
  return JSON.stringify({
    symbol: ev.symbol,
    timeframe: ev.timeframe,
    // SPEC §6: bar open in unix seconds on the broker server clock.
    time: c.serverTime,
    timeUtc: c.time,
    open: c.open,
    high: c.high,
    low: c.low,
    close: c.close,
    ticks: c.ticks,
    volume: c.volume,
    closed: ev.closed,
    partial,
  });
}

function positionJson(p: Position, clock: ServerClock) {
  return {
    ticket: p.ticket, symbol: p.symbol, type: p.type, volume: p.volume, openPrice: p.openPrice,
    openTime: serverIso(clock.toServer(p.openTimeMsc)), openTimeUtc: new Date(p.openTimeMsc).toISOString(),
    currentPrice: p.currentPrice, sl: p.sl, tp: p.tp, magic: p.magic, expertId: p.magic, comment: p.comment,
    commission: p.commission, swap: p.swap, profit: p.profit,
  };
}

function orderJson(o: Order, clock: ServerClock) {
  return {
    ticket: o.ticket, symbol: o.symbol, type: o.type, state: o.state, volume: o.volume, volumeInitial: o.volumeInitial,
    price: o.openPrice, sl: o.sl, tp: o.tp,
    ...(o.stopLimitPrice !== undefined ? { stopLimitPrice: o.stopLimitPrice } : {}),
    ...(o.expiration !== undefined ? { expiration: serverIso(clock.toServer(o.expiration)), expirationUtc: new Date(o.expiration).toISOString() } : {}),
    timeSetup: serverIso(clock.toServer(o.openTimeMsc)), timeSetupUtc: new Date(o.openTimeMsc).toISOString(),
    magic: o.magic, expertId: o.magic, comment: o.comment, positionId: o.positionId,
  };
}

export function positionsData(positions: readonly Position[], snapshot: boolean, clock: ServerClock): string {
  return JSON.stringify({ snapshot, positions: positions.map((p) => positionJson(p, clock)) });
}

export function ordersData(orders: readonly Order[], snapshot: boolean, clock: ServerClock): string {
  return JSON.stringify({ snapshot, orders: orders.map((o) => orderJson(o, clock)) });
}

/** A deal as TRADE carries it: the broker's deal record (the source /OrderHistory reads). */
export function tradeData(d: Deal, clock: ServerClock): string {
  return JSON.stringify({
    ticket: d.ticket, order: d.order, position: d.position, symbol: d.symbol, type: d.type, entry: d.entry,
    volume: d.volume, price: d.price, magic: d.magic, expertId: d.magic, comment: d.comment,
    commission: d.commission, swap: d.swap, profit: d.profit,
    time: serverIso(clock.toServer(d.timeMsc)), timeMsc: clock.toServer(d.timeMsc),
    timeUtc: new Date(d.timeMsc).toISOString(), timeMscUtc: d.timeMsc,
  });
}
