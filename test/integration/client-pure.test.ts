// The SDK's pure pieces: backoff, retry decisions, since, and the stream client's delivery rules
// driven by a model gateway over a fake WebSocket (random disconnect schedules, replays that
// overlap what was delivered, histories too short): account events arrive exactly once, in order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffDelay, parseRetryAfter, shouldRetry } from '../../src/client/backoff.js';
import { StreamCursor, formatSince, parseSince } from '../../src/client/cursor.js';
import { CLIENT_ORDER_ID_RE, newClientOrderId } from '../../src/client/ids.js';
import { parseSince as gatewayParseSince } from '../../src/stream/history.js';
import { TagwClient } from '../../src/client/index.js';
import { ModelGateway, type Step } from '../helpers/client-model.js';

describe('backoff', () => {
  it('stays within [cap/2, cap] of the capped exponential bound, never above maxMs', () => {
    fc.assert(fc.property(fc.nat(60), fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 60_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (attempt, baseMs, maxMs, r) => {
      const cap = Math.min(maxMs, baseMs * 2 ** attempt);
      const d = backoffDelay(attempt, { baseMs, maxMs }, () => r);
      expect(d).toBeGreaterThanOrEqual(Math.floor(cap / 2));
      expect(d).toBeLessThanOrEqual(Math.ceil(cap));
      expect(d).toBeLessThanOrEqual(maxMs);
    }));
  });

  it('retries what changes nothing twice, never 401/403/409/422 or an unsafe call after a lost answer', () => {
    expect(shouldRetry('safe', { status: 0 })).toBe(true);
    expect(shouldRetry('safe', { status: 503, code: 'NOT_CONNECTED' })).toBe(true);
    expect(shouldRetry('safe', { status: 500, code: 'TERMINAL_ERROR' })).toBe(true);
    expect(shouldRetry('safe', { status: 429, code: 'RATE_LIMITED' })).toBe(true);
    expect(shouldRetry('safe', { status: 429, code: 'AUTH_THROTTLED' })).toBe(false);
    expect(shouldRetry('unsafe', { status: 429, code: 'RATE_LIMITED' })).toBe(true);
    for (const status of [400, 401, 403, 404, 409, 422, 501]) expect(shouldRetry('safe', { status })).toBe(false);
    for (const status of [0, 500, 503]) expect(shouldRetry('unsafe', { status })).toBe(false);
  });

  it('retries a 409 IDEMPOTENCY_UNCERTAIN only when it says it is not final (the same id again settles it)', () => {
    for (const safety of ['safe', 'unsafe'] as const) {
      expect(shouldRetry(safety, { status: 409, code: 'IDEMPOTENCY_UNCERTAIN' })).toBe(false);
      expect(shouldRetry(safety, { status: 409, code: 'IDEMPOTENCY_UNCERTAIN', final: true })).toBe(false);
      expect(shouldRetry(safety, { status: 409, code: 'IDEMPOTENCY_UNCERTAIN', final: false })).toBe(true);
    }
    expect(shouldRetry('safe', { status: 409, code: 'IDEMPOTENCY_KEY_REUSED', final: false })).toBe(false);
  });

  it('reads retry-after as seconds or an HTTP date', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter(null, 0)).toBeUndefined();
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
  });
});

describe('ids and since', () => {
  it('makes clientOrderIds the gateway accepts, all different', () => {
    const ids = new Set(Array.from({ length: 2000 }, () => newClientOrderId()));
    expect(ids.size).toBe(2000);
    for (const id of ids) expect(id).toMatch(CLIENT_ORDER_ID_RE);
  });

  it('since round-trips and refuses what is not <epoch>:<seq>', () => {
    fc.assert(fc.property(fc.stringMatching(/^[A-Za-z0-9_-]{1,32}$/), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), (epoch, seq) => {
      expect(parseSince(formatSince({ epoch, seq }))).toEqual({ epoch, seq });
    }));
    for (const bad of ['', 'abc', ':5', 'e:', 'e:-1', 'e:1.5', 'e:x']) expect(parseSince(bad)).toBeUndefined();
  });

  it("since: the SDK takes exactly what the gateway takes (one it refuses, the stream reconnected for ever)", () => {
    // Before: the SDK took any epoch and leading zeros ('a b:5', 'e:007', a 40-character epoch), the
    // gateway refused each upgrade with 400, and the stream went on reconnecting without a word.
    for (const bad of ['a b:5', 'e:007', `${'e'.repeat(33)}:1`, 'a:b:1', 'é:1']) {
      expect(gatewayParseSince(bad), bad).toBeNull();
      expect(parseSince(bad), bad).toBeUndefined();
    }
    const near = fc.tuple(fc.stringMatching(/^[A-Za-z0-9_: .é-]{0,34}$/), fc.constantFrom('', ':'), fc.stringMatching(/^[0-9x-]{0,18}$/)).map(([e, c, s]) => `${e}${c}${s}`);
    fc.assert(fc.property(fc.oneof(near, fc.string()), (text) => {
      expect(parseSince(text) ?? null).toEqual(gatewayParseSince(text));
    }), { numRuns: 2000 });
  });

  it('cursor: a snapshot sets the position, a seq at or below it is a duplicate, a hole is a gap', () => {
    const c = new StreamCursor();
    expect(c.accept({ type: 'POSITIONS', epoch: 'a', seq: 4, data: { snapshot: true } })).toBe('deliver');
    expect(c.accept({ type: 'ORDERS', epoch: 'a', seq: 4, data: { snapshot: true } })).toBe('deliver');
    expect(c.accept({ type: 'ORDERS', epoch: 'a', seq: 4, data: { snapshot: true } })).toBe('duplicate');
    expect(c.accept({ type: 'POSITIONS', epoch: 'a', seq: 3, data: { snapshot: true } })).toBe('duplicate');
    expect(c.accept({ type: 'TRADE', epoch: 'a', seq: 4, data: {} })).toBe('duplicate');
    expect(c.accept({ type: 'TRADE', epoch: 'a', seq: 5, data: {} })).toBe('deliver');
    expect(c.accept({ type: 'TRADE', epoch: 'a', seq: 7, data: {} })).toBe('gap');
    expect(c.accept({ type: 'QUOTE', epoch: 'm', seq: 1, data: {} })).toBe('unpositioned');
    expect(c.since()).toBe('a:5');
  });
});

describe('stream client against a model gateway (random disconnect schedules)', () => {
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.record({ kind: fc.constant('events' as const), n: fc.integer({ min: 1, max: 8 }) }),
    fc.record({ kind: fc.constant('drop' as const), overlap: fc.nat(3), inFlight: fc.nat(3) }),
    fc.record({ kind: fc.constant('stall' as const) }),
    fc.record({ kind: fc.constant('restart' as const), keepEpoch: fc.boolean() }),
  );

  it('delivers every account event once, in order; recovered:false exactly when the gateway could not replay', async () => {
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), fc.integer({ min: 2, max: 40 }), async (steps, historySize) => {
      const model = new ModelGateway(historySize);
      const client = new TagwClient({ baseUrl: 'http://model.invalid', apiKey: 'k', WebSocket: model.WebSocket, random: () => 0.5 });
      const sub = client.stream('acct', { backoff: { baseMs: 0, maxMs: 0 }, heartbeatTimeoutMs: 5 });
      const got: Array<{ type: string; epoch?: string; seq?: number; data: any }> = [];
      sub.on('*', (f) => got.push(f));
      await model.run(steps);
      sub.close();

      // Account events, split where the client was told continuity was lost.
      const segments: Array<typeof got> = [[]];
      for (const f of got) {
        if (f.type === 'RESUMED' && f.data.recovered === false) segments.push([]);
        else if (f.type === 'TRADE' || f.type === 'POSITIONS') segments.at(-1)!.push(f);
      }
      const trades = got.filter((f) => f.type === 'TRADE').map((f) => f.data.ticket as number);
      // Never twice, never backwards: ticket i is the i-th event the model generated.
      expect(new Set(trades).size).toBe(trades.length);
      expect([...trades].sort((a, b) => a - b)).toEqual(trades);
      // Within a segment, every event the model made after the segment's snapshot, none missing.
      for (const seg of segments) {
        const ts = seg.filter((f) => f.type === 'TRADE').map((f) => f.data.ticket as number);
        for (let i = 1; i < ts.length; i++) expect(ts[i]).toBe(ts[i - 1]! + 1);
      }
      expect(segments.length - 1).toBe(model.unrecoverable);
      if (model.unrecoverable === 0) expect(trades.at(-1) ?? 0).toBe(model.produced);
    }), { numRuns: 100 });
  });
});

describe('a bot that saves stream.since and restarts from it (model gateway)', () => {
  // The bot reads with for await, more slowly than frames come (they wait in the SDK's buffer), saves
  // `since` after each frame it handled, and at a random point dies and comes back with the saved
  // position: every event once over both lives, none lost in the buffer of the first.
  const plan = fc.array(fc.record({ events: fc.integer({ min: 0, max: 6 }), reads: fc.integer({ min: 0, max: 8 }) }), { minLength: 1, maxLength: 15 });

  it('no event lost or doubled across the restart, however far the reader lags', async () => {
    await fc.assert(fc.asyncProperty(plan, async (rounds) => {
      const model = new ModelGateway(10_000);
      const client = new TagwClient({ baseUrl: 'http://model.invalid', apiKey: 'k', WebSocket: model.WebSocket, random: () => 0.5 });
      const first = client.stream('acct', { backoff: { baseMs: 0, maxMs: 0 } });
      let arrived = 0;
      first.on('*', () => void arrived++);
      const frames = first[Symbol.asyncIterator]();
      const handled: number[] = [];
      let saved: string | undefined;
      let read = 0;
      const readOne = async () => {
        const f = (await frames.next()).value as { type: string; data: { ticket: number } };
        read++;
        if (f.type === 'TRADE') handled.push(f.data.ticket);
        saved = first.since;
      };
      await model.run([]);
      await readOne(); // the snapshot
      for (const r of rounds) {
        if (r.events) await model.run([{ kind: 'events', n: r.events }]);
        for (let i = 0; i < r.reads && read < arrived; i++) await readOne();
      }
      first.close(); // the bot dies with frames still in the buffer
      const second = client.stream('acct', { backoff: { baseMs: 0, maxMs: 0 }, ...(saved ? { since: saved } : {}) });
      const later: number[] = [];
      second.on('TRADE', (f) => later.push(f.data.ticket));
      await model.run([]);
      second.close();
      expect([...handled, ...later]).toEqual(Array.from({ length: model.produced }, (_, i) => i + 1));
    }), { numRuns: 100 });
  });
});
