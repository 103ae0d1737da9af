// The bridge protocol (docs/bridge-protocol.md): newline-delimited JSON frames over TCP.
// Shared by the standalone simulator server and the BridgeBrokerConnection client.
import type { BrokerEvents } from './types.js';
import {
  BrokerAuthError, BrokerDisconnectedError, BrokerError, BrokerNotSupportedError, BrokerRequestError,
  BrokerTimeoutError,
} from '../market/brokerErrors.js';
import type { Position, RejectReason } from '../market/orders.js';
import type { Platform } from '../market/server.js';

export const BRIDGE_PROTOCOL_VERSION = 1;

export interface HelloArgs {
  readonly version: number;
  readonly server: string;
  readonly login: string;
  readonly password: string;
  /** Optional extensions the client understands (a server that knows none ignores them). */
  readonly features?: readonly string[];
}

/** Extension: `positionsDelta` events (only the positions that changed, and the tickets closed)
 *  instead of a full `positions` snapshot after every trade, which grew with the open positions
 *  (~230 bytes each, encoded, sent and parsed per trade). Asked in the hello's `features`, granted
 *  in its reply's; a peer that does not know it keeps full snapshots (protocol version unchanged). */
export const POSITIONS_DELTA = 'positionsDelta';
export interface PositionsDelta {
  readonly upsert: readonly Position[];
  readonly removed: readonly number[];
}

/** Server side, one per socket: what changed since the last list sent on it. */
export class PositionsDeltaEncoder {
  /** ticket -> the position as last sent. */
  private readonly sent = new Map<number, Position>();
  encode(list: readonly Position[]): PositionsDelta {
    const upsert: Position[] = [];
    const now = new Set<number>();
    for (const p of list) {
      now.add(p.ticket);
      const last = this.sent.get(p.ticket);
      if (last && sameRecord(last, p)) continue;
      this.sent.set(p.ticket, p);
      upsert.push(p);
    }
    const removed: number[] = [];
    for (const ticket of this.sent.keys()) if (!now.has(ticket)) removed.push(ticket);
    for (const ticket of removed) this.sent.delete(ticket);
    return { upsert, removed };
  }
}

/** Field by field (a Position's fields are primitives): a JSON encoding of each position per
 *  trade to compare cost as much as the snapshot it replaces. */
function sameRecord(a: Position, b: Position): boolean {
  const keys = Object.keys(b);
  if (Object.keys(a).length !== keys.length) return false;
  for (const k of keys) if ((a as unknown as Record<string, unknown>)[k] !== (b as unknown as Record<string, unknown>)[k]) return false;
  return true;
}

/** Client side, one per login (a new socket starts from nothing, as its server's encoder does). */
export class PositionsDeltaDecoder {
  private readonly positions = new Map<number, Position>();
  /** The full list after `delta`, in the order positions first appeared. */
  apply(delta: PositionsDelta): Position[] {
    for (const ticket of delta.removed) this.positions.delete(ticket);
    for (const p of delta.upsert) this.positions.set(p.ticket, p);
    return [...this.positions.values()];
  }
}

export interface RequestFrame {
  readonly id: number;
  readonly op: string;
  readonly args?: Record<string, unknown>;
}
export interface ErrorBody {
  readonly code: string;
  readonly message: string;
  readonly reason?: RejectReason;
  readonly platform?: Platform;
}
export type ReplyFrame = { readonly id: number; readonly result: unknown } | { readonly id: number; readonly error: ErrorBody };
export interface EventFrame<E extends keyof BrokerEvents = keyof BrokerEvents> {
  readonly event: E;
  readonly data: BrokerEvents[E];
}

/** Operations whose effect is a trade: on a lost reply they may have executed. */
export const TRADE_OPS: ReadonlySet<string> = new Set(['orderSend', 'orderModify', 'orderClose', 'orderCloseBy', 'orderDelete']);

export function encodeError(err: unknown): ErrorBody {
  if (err instanceof BrokerRequestError) return { code: err.code, message: err.message, reason: err.reason };
  if (err instanceof BrokerError) return { code: err.code, message: err.message };
  return { code: 'BROKER_INTERNAL', message: err instanceof Error ? err.message : String(err) };
}

export function decodeError(body: ErrorBody): BrokerError {
  switch (body.code) {
    case 'BROKER_AUTH':
      return new BrokerAuthError(body.message);
    case 'BROKER_REQUEST':
      return new BrokerRequestError(body.reason ?? 'INVALID_REQUEST', body.message);
    case 'BROKER_NOT_SUPPORTED': {
      const e = new BrokerNotSupportedError('operation', 'P4');
      e.message = body.message;
      return e;
    }
    case 'BROKER_DISCONNECTED':
      return new BrokerDisconnectedError(body.message);
    case 'BROKER_TIMEOUT':
      return new BrokerTimeoutError(true, body.message);
    default:
      return new BrokerError(body.code, body.message);
  }
}

/**
 * Splits a byte stream into lines; calls `onLine` for each complete one. The search for the next
 * newline resumes where the previous chunk's ended, so a long line costs linear time, not
 * quadratic. A partial line longer than `maxLineChars` is dropped and `onOverflow` is called (the
 * peer is not speaking the protocol: its owner closes the socket).
 */
export class LineReader {
  private buffer = '';
  /** The buffer before this offset holds no newline. */
  private scanned = 0;
  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxLineChars = Number.POSITIVE_INFINITY,
    private readonly onOverflow?: () => void,
  ) {}
  push(chunk: string): void {
    this.buffer += chunk;
    let start = 0;
    let nl = this.buffer.indexOf('\n', this.scanned);
    while (nl >= 0) {
      const line = this.buffer.slice(start, nl);
      start = nl + 1;
      if (line.length > 0) this.onLine(line);
      nl = this.buffer.indexOf('\n', start);
    }
    if (start > 0) this.buffer = this.buffer.slice(start);
    this.scanned = this.buffer.length;
    if (this.buffer.length > this.maxLineChars) {
      this.buffer = '';
      this.scanned = 0;
      this.onOverflow?.();
    }
  }
}

/** A parsed frame is a JSON object (not null, an array, a string or a number). */
export function isFrameObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
