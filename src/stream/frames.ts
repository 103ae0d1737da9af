// Frames of /v1/stream (SPEC §6). Every server frame is `{"type":..., "data":...}`, with `seq` and
// `epoch` when it has a stream position (docs/stream.md "Frames").
// Encoders build the JSON text by hand around JSON.stringify of the payload so a tick is
// serialized once and the same string goes to every subscriber (see docs/stream.md for seq).
import type { ServerClock } from '../market/serverClock.js';
import type { Deal, Order, Position } from '../market/orders.js';
import type { Tick } from '../market/server.js';
import type { CandleEvent } from '../market/timeframes.js';
import type { ConnectionPhase } from '../runtime/hosts/accountRegistry.js';

export type FrameType = 'QUOTE' | 'POSITIONS' | 'ORDERS' | 'TRADE' | 'CANDLE' | 'HEARTBEAT' | 'SUBSCRIBED' | 'UNSUBSCRIBED' | 'ERROR' | 'RESUMED';

/** QUOTE/CANDLE: `{"type":T,"seq":N,"epoch":E,"data":<json>}`, seq of the topic, epoch of the gateway's market data. */
export function marketFrame(type: 'QUOTE' | 'CANDLE', seq: number, epoch: string, dataJson: string): string {
  return `{"type":"${type}","seq":${seq},"epoch":"${epoch}","data":${dataJson}}`;
}

/** POSITIONS/ORDERS/TRADE: `{"type":T,"seq":N,"epoch":E,"data":<json>}`, the account stream's position. */
export function accountFrame(type: FrameType, seq: number, epoch: string, dataJson: string): string {
  return `{"type":"${type}","seq":${seq},"epoch":"${epoch}","data":${dataJson}}`;
}

/** Control frames (HEARTBEAT, SUBSCRIBED, UNSUBSCRIBED, ERROR, RESUMED): no stream position. */
export function controlFrame(type: FrameType, dataJson: string): string {
  return `{"type":"${type}","data":${dataJson}}`;
}

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

export interface HeartbeatSymbol {
  symbol: string;
  lastTickTimeMsc: number | null;
  lastQuoteAgeMs: number | null;
  lastTickTimeMscUtc: number | null;
}

export function heartbeatData(connection: ConnectionPhase, symbols: HeartbeatSymbol[], nowMs: number): string {
  return JSON.stringify({ connection, timeMscUtc: nowMs, symbols });
}

export function errorData(code: string, message: string, request?: unknown): string {
  if (request !== undefined) {
    try {
      return JSON.stringify({ error: code, message, request });
    } catch {
      // A client message JSON.parse took but JSON.stringify cannot write back (arrays nested some
      // thousands deep exhaust its stack): answered without the echo, never left unanswered.
    }
  }
  return JSON.stringify({ error: code, message });
}
