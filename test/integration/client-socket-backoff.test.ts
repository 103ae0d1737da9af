// The reconnecting socket's backoff (src/client/socket.ts) over random connection lifetimes: each
// wait is the capped exponential bound's half (random() = 0) at an attempt that grows by one per
// failure and starts again from 0 only after a connection that stayed open for healthyMs (the
// backoff's maxMs). Before, any frame reset it: a server answering each connection with one frame
// and a close got a client back every baseMs/2 for ever (client-reconnect-backoff.test.ts).
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ReconnectingSocket, type WebSocketLike } from '../../src/client/socket.js';

afterEach(() => vi.useRealTimers());

const BACKOFF = { baseMs: 100, maxMs: 1_000 };

describe('ReconnectingSocket backoff', () => {
  it('grows by one attempt per failure; from the bottom after a connection open for maxMs', async () => {
    await fc.assert(fc.asyncProperty(fc.array(fc.constantFrom(0, 5, 999, 1_000, 3_000), { minLength: 1, maxLength: 12 }), async (lifetimes) => {
      vi.useFakeTimers();
      let n = 0;
      // Each connection opens, brings one frame, and is closed by the server after its lifetime.
      class FakeSocket implements WebSocketLike {
        readyState = 0;
        onopen: ((ev: unknown) => void) | null = null;
        onmessage: ((ev: unknown) => void) | null = null;
        onclose: ((ev: unknown) => void) | null = null;
        onerror: ((ev: unknown) => void) | null = null;
        constructor() {
          const life = lifetimes[n++] ?? 1e9;
          setTimeout(() => {
            this.readyState = 1;
            this.onopen?.({});
            this.onmessage?.({ data: '{"type":"ERROR","data":{}}' });
            setTimeout(() => {
              this.readyState = 3;
              this.onclose?.({ code: 4010, reason: '' });
            }, life);
          }, 0);
        }
        send(): void {}
        close(): void {
          this.readyState = 3;
        }
      }
      const delays: number[] = [];
      const s = new ReconnectingSocket(
        { WebSocket: FakeSocket, backoff: BACKOFF, silenceMs: 0, connectTimeoutMs: 60_000, random: () => 0 },
        { url: async () => ({ url: 'ws://x' }), opened: () => undefined, frame: () => undefined, failed: () => undefined, closed: () => 'retry', state: (st, d) => void (st === 'reconnecting' && delays.push(d!.delayMs!)) },
      );
      s.start();
      for (let i = 0; i < lifetimes.length * 4 && delays.length < lifetimes.length; i++) await vi.advanceTimersByTimeAsync(1_000);
      s.close();
      let attempt = 0;
      const expected = lifetimes.map((life) => {
        if (life >= BACKOFF.maxMs) attempt = 0;
        return Math.min(BACKOFF.maxMs, BACKOFF.baseMs * 2 ** attempt++) / 2;
      });
      expect(delays).toEqual(expected);
    }), { numRuns: 100 });
  });
});
