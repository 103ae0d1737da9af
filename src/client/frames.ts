// Frames of /v1/stream and /ws as the SDK hands them over (docs/stream.md, docs/gateway.md).
import type { Json } from './types.js';

export interface StreamFrame<T extends string = string, D = any> {
  type: T;
  /** Per-socket, per-topic or (account events with `epoch`) per-account position. */
  seq?: number;
  /** Account events only: the history their `seq` counts in (docs/stream.md, resume). */
  epoch?: string;
  data: D;
}

export interface Quote { symbol: string; bid: number; ask: number; time: string; timeMsc: number; timeUtc: string; timeMscUtc: number; ageMs: number; volume?: number }
export interface Candle { symbol: string; timeframe: string; time: number; timeUtc: number; open: number; high: number; low: number; close: number; ticks: number; volume: number; closed: boolean; partial: boolean }
export interface TradeDeal {
  ticket: number; order: number; position: number; symbol: string; type: string; entry: string; volume: number; price: number;
  magic: number; expertId: number; comment: string; commission: number; swap: number; profit: number;
  time: string; timeMsc: number; timeUtc: string; timeMscUtc: number;
}
export interface StreamPositionRow { ticket: number; symbol: string; type: 'Buy' | 'Sell'; volume: number; openPrice: number; currentPrice: number; sl: number; tp: number; magic: number; comment: string; profit: number; [k: string]: Json | undefined }
export interface StreamOrderRow { ticket: number; symbol: string; type: string; state: string; volume: number; price: number; magic: number; comment: string; [k: string]: Json | undefined }
/** A /ws BOOK push: top of book only (one level per side: the broker interface carries no depth). */
export interface Book { symbol: string; bids: Array<{ price: number; volume: number }>; asks: Array<{ price: number; volume: number }>; time: string; timeMsc: number; timeUtc: string; timeMscUtc: number }
/** The answer to a subscribe or unsubscribe. */
export interface SubscriptionAnswer { symbol: string; timeframes: string[]; remainingTimeframes?: string[] }
export interface ErrorFrameData { error: string; message: string; request?: unknown }
export interface Resumed { recovered: boolean; replayed: number; /** Set when the SDK, not the gateway, concluded continuity was lost (a new epoch without RESUMED, repeated gaps). */ synthetic?: boolean; reason?: string }

export type KnownFrame =
  | StreamFrame<'QUOTE', Quote>
  | StreamFrame<'CANDLE', Candle>
  | StreamFrame<'TRADE', TradeDeal>
  | StreamFrame<'POSITIONS', { snapshot: boolean; positions: StreamPositionRow[] }>
  | StreamFrame<'ORDERS', { snapshot: boolean; orders: StreamOrderRow[] }>
  | StreamFrame<'HEARTBEAT', { connection: string; timeMscUtc: number; symbols: Array<{ symbol: string; lastTickTimeMsc: number | null; lastQuoteAgeMs: number | null; lastTickTimeMscUtc: number | null }> }>
  | StreamFrame<'RESUMED', Resumed>
  // One member each: `FrameOf<'SUBSCRIBED'>` (Extract) matches no member typed 'SUBSCRIBED' | 'UNSUBSCRIBED'.
  | StreamFrame<'SUBSCRIBED', SubscriptionAnswer>
  | StreamFrame<'UNSUBSCRIBED', SubscriptionAnswer>
  | StreamFrame<'ERROR', ErrorFrameData>;

export type FrameOf<T extends KnownFrame['type']> = Extract<KnownFrame, { type: T }>;

/** Frames of a gateway session's `/ws` (docs/gateway.md): market data pushes, and the answers to a
 *  ping (PONG) and to any other message (ERROR). */
export type GatewayFrame =
  | StreamFrame<'QUOTE', Quote>
  | StreamFrame<'CANDLE', Candle>
  | StreamFrame<'BOOK', Book>
  | StreamFrame<'PONG', Record<string, never>>
  | StreamFrame<'ERROR', ErrorFrameData>;

export type GatewayFrameOf<T extends GatewayFrame['type']> = Extract<GatewayFrame, { type: T }>;
