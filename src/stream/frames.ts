// Frames of /v1/stream (SPEC §6). Every server frame is `{"type":..., "data":...}`, with `seq` and
// `epoch` when it has a stream position (docs/stream.md "Frames").
// Encoders build the JSON text by hand around the already-serialized payload (market and account
// payloads: src/runtime/frameData.ts), so a tick is serialized once and the same string goes to every
// subscriber (see docs/stream.md for seq).
import type { ConnectionPhase } from '../runtime/hosts/accountRegistry.js';
import { redactKeys } from '../util/redactKeys.js';

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
      return redactKeys(JSON.stringify({ error: code, message, request }));
    } catch {
      // A client message JSON.parse took but JSON.stringify cannot write back (arrays nested some
      // thousands deep exhaust its stack): answered without the echo, never left unanswered.
    }
  }
  return redactKeys(JSON.stringify({ error: code, message }));
}
