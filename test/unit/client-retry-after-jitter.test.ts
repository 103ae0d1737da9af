// A retry the server timed (retry-after, a 429's retryAfterMs) still gets the backoff's random half on
// top. Bot walk: five orders over a key's 2 orders/s were refused with the same retryAfterMs and all
// came back in the same millisecond (wait = max(backoff, retry-after), and retry-after was the larger):
// the same lock-step a fleet of bots would fall into after a 503 retry-after from a draining gateway.
import { describe, expect, it } from 'vitest';
import { retryWait } from '../../src/client/backoff.js';
import { TagwClient } from '../../src/client/index.js';

const opts = { baseMs: 100, maxMs: 5_000 };

describe('retry-after with jitter', () => {
  it('never sooner than retry-after nor the backoff, and spread by the random half above retry-after', () => {
    for (const attempt of [0, 1, 3, 10]) {
      for (const r of [0, 0.25, 0.5, 0.999]) {
        const cap = Math.min(opts.maxMs, opts.baseMs * 2 ** attempt);
        for (const after of [0, 3, 500, 1_000, 60_000]) {
          const w = retryWait(attempt, opts, () => r, after);
          expect(w).toBeGreaterThanOrEqual(after);
          expect(w).toBeGreaterThanOrEqual(Math.floor(cap / 2));
          expect(w).toBeLessThanOrEqual(Math.max(cap, after + Math.ceil(cap / 2)));
        }
      }
    }
    expect(retryWait(0, opts, () => 0, 1_000)).toBe(1_000);
    expect(retryWait(0, opts, () => 0.5, 1_000)).toBe(1_025);
    expect(retryWait(0, opts, () => 0.5, 0)).toBe(75);
  });

  it('two calls refused with the same retryAfterMs come back at different times', async () => {
    const waits: number[][] = [[], []];
    const make = (i: number, r: number) => {
      let n = 0;
      const fetch: typeof globalThis.fetch = async () => (n++ === 0
        ? new Response(JSON.stringify({ error: 'RATE_LIMITED', message: 'slow down', retryAfterMs: 500 }), { status: 429 })
        : new Response(JSON.stringify({ ok: 1 }), { status: 200 }));
      return new TagwClient({ baseUrl: 'http://gw.test', apiKey: 'k', fetch, random: () => r, sleep: async (ms) => void waits[i]!.push(ms) });
    };
    await Promise.all([make(0, 0.1).account('a').AccountSummary(), make(1, 0.9).account('a').AccountSummary()]);
    expect(waits[0]![0]).toBeGreaterThanOrEqual(500);
    expect(waits[1]![0]).toBeGreaterThanOrEqual(500);
    expect(waits[0]![0]).not.toBe(waits[1]![0]);
  });
});
