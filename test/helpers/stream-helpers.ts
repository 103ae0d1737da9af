// WebSocket client helpers for the /v1/stream tests: a real `ws` client that records every frame.
import { expect } from 'vitest';
import WebSocket from 'ws';
import { toServerTime } from '../../src/market/serverClock.js';

export interface Frame { type: string; seq: number; epoch?: string; data: any }

const ACCOUNT_FRAMES = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const MARKET_FRAMES = new Set(['QUOTE', 'CANDLE']);

/**
 * The socket's account stream has no gap (docs/stream.md): one epoch, the initial POSITIONS/ORDERS
 * snapshot pair on one seq, every later account frame one above the one before; control frames
 * carry no seq and no epoch.
 */
export function expectAccountStream(frames: readonly Frame[]): Frame[] {
  const acc = frames.filter((f) => ACCOUNT_FRAMES.has(f.type));
  // A socket that resumed with its history (RESUMED recovered:true) starts after the snapshot it had:
  // a POSITIONS/ORDERS pair first there is a resync's, one seq each, not the opening pair on one seq.
  const opened = !frames.some((f) => f.type === 'RESUMED' && f.data.recovered === true);
  acc.forEach((f, i) => {
    expect(typeof f.epoch, JSON.stringify(f).slice(0, 200)).toBe('string');
    expect(f.epoch).toBe(acc[0]!.epoch);
    if (i === 0) return;
    const p = acc[i - 1]!;
    const pair = opened && i === 1 && p.type === 'POSITIONS' && p.data.snapshot === true && f.type === 'ORDERS' && f.data.snapshot === true;
    expect(f.seq, `${f.type} after ${p.type} ${p.seq}`).toBe(pair ? p.seq : p.seq + 1);
  });
  for (const f of frames) if (!ACCOUNT_FRAMES.has(f.type) && !MARKET_FRAMES.has(f.type)) expect(f).not.toHaveProperty('seq');
  return acc;
}

export interface Refused { refused: true; status: number; headers: Record<string, string | string[] | undefined>; body: any }

export class StreamClient {
  readonly frames: Frame[] = [];
  closed: { code: number; reason: string } | null = null;
  /** The last socket error after the upgrade (a 1006 close says nothing about its cause). */
  error: string | null = null;
  private waiters: Array<() => void> = [];
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.frames.push(JSON.parse(data.toString()) as Frame);
      this.wake();
    });
    ws.on('error', (e) => {
      this.error = e.message;
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.wake();
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(msg: unknown): void {
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  of(type: string): Frame[] {
    return this.frames.filter((f) => f.type === type);
  }

  /** Waits until `pred` holds over the frames received so far (or fails after timeoutMs). */
  async until<T>(pred: (c: StreamClient) => T | undefined | false, timeoutMs = 8_000, what = 'condition'): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = pred(this);
      if (v) return v;
      const left = deadline - Date.now();
      if (left <= 0) {
        const tail = this.frames.slice(-5).map((f) => JSON.stringify(f).slice(0, 300));
        throw new Error(`timed out waiting for ${what}; closed=${JSON.stringify(this.closed)}; error=${this.error}; last frames:\n${tail.join('\n')}`);
      }
      await new Promise<void>((r) => {
        const t = setTimeout(r, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(t);
          r();
        });
      });
    }
  }

  next(type: string, after = this.frames.length, timeoutMs?: number): Promise<Frame> {
    return this.until((c) => c.frames.slice(after).find((f) => f.type === type), timeoutMs, `a ${type} frame`);
  }

  close(): Promise<void> {
    if (this.closed || this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((r) => {
      this.ws.once('close', () => r());
      this.ws.close();
    });
  }
}

/** Opens /v1/stream; resolves with a client, or with the HTTP refusal (status + JSON body). */
export function openStream(baseUrl: string, query: Record<string, string> | [string, string][], headers: Record<string, string> = {}): Promise<StreamClient | Refused> {
  const url = `${baseUrl.replace(/^http/, 'ws')}/v1/stream?${new URLSearchParams(query).toString()}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    let client: StreamClient | null = null;
    ws.once('open', () => {
      resolve(client!);
    });
    // Attach the recorder at once so frames sent right after the upgrade are not missed.
    client = new StreamClient(ws);
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
        resolve({ refused: true, status: res.statusCode ?? 0, headers: res.headers, body });
        ws.terminate();
      });
    });
    ws.once('error', (e) => {
      if (ws.readyState !== WebSocket.OPEN) reject(e);
    });
  });
}

export async function mustOpen(baseUrl: string, query: Record<string, string>, headers: Record<string, string> = {}): Promise<StreamClient> {
  const r = await openStream(baseUrl, query, headers);
  if ('refused' in r) throw new Error(`stream refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r;
}

/** The simulated servers' clock (GMT+2, GMT+3 in US DST) minus UTC at a UTC instant, in ms. */
export const simServerOffsetMs = (utcMs: number) => toServerTime(utcMs, { description: '', standardOffsetMinutes: 120, dst: 'US' }) - utcMs;
