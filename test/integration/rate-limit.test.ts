// Per-key rate limits (issue 16 item 5): the token bucket at its boundary (fast-check), the
// limiter, and the 429 over real sockets with an injected clock.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyRateLimiter } from '../../src/auth/keyRateLimit.js';
import { fullBucket, take } from '../../src/auth/tokenBucket.js';
import { mgmt, ManualClock, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('token bucket', () => {
  const rates = fc.oneof(fc.integer({ min: 1, max: 2_000 }), fc.double({ min: 0.05, max: 500, noNaN: true }));
  const gaps = fc.array(fc.integer({ min: 0, max: 3_000 }), { minLength: 1, maxLength: 300 });

  it('never lets more through than the burst plus the refill since the start', () => {
    fc.assert(fc.property(rates, gaps, (rate, steps) => {
      const burst = Math.max(1, rate);
      const b = fullBucket(burst, 0);
      let now = 0;
      let taken = 0;
      for (const gap of steps) {
        now += gap;
        if (take(b, rate, burst, now) === 0) taken++;
        expect(taken).toBeLessThanOrEqual(burst + (now * rate) / 1000 + 1e-6);
      }
    }));
  });

  it('the announced wait is exact: a request at now+wait passes, one a millisecond earlier does not', () => {
    fc.assert(fc.property(rates, gaps, (rate, steps) => {
      const burst = Math.max(1, rate);
      const b = fullBucket(burst, 0);
      let now = 0;
      for (const gap of steps) {
        now += gap;
        const wait = take(b, rate, burst, now);
        if (wait === 0) continue;
        expect(wait).toBeGreaterThanOrEqual(1);
        if (wait > 1) {
          const early = { ...b };
          expect(take(early, rate, burst, now + wait - 1)).toBeGreaterThan(0);
        }
        now += wait;
        expect(take(b, rate, burst, now)).toBe(0);
      }
    }), { examples: [[1, [0, 688, 0]]] }); // 0.688 tokens at 1/s: a rounding error announced 313 ms for 312
  });

  it('a client that keeps to the rate is never refused; a full bucket takes exactly `burst` at once', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: 200 }), (rate, n) => {
      const b = fullBucket(rate, 0);
      let passed = 0;
      while (take(b, rate, rate, 0) === 0) passed++;
      expect(passed).toBe(rate);
      const spacing = Math.ceil(1000 / rate);
      for (let i = 1; i <= n; i++) expect(take(b, rate, rate, i * spacing)).toBe(0);
    }));
  });

  it('rate 0 is unlimited; a clock that steps back refills nothing', () => {
    const b = fullBucket(1, 1_000);
    for (let i = 0; i < 1_000; i++) expect(take(b, 0, 1, 1_000)).toBe(0);
    expect(take(b, 1, 1, 1_000)).toBe(0);
    expect(take(b, 1, 1, 0)).toBeGreaterThan(0);
  });
});

describe('KeyRateLimiter', () => {
  it('a refused order uses up no request token, and overrides win over defaults until forgotten', () => {
    const clock = new ManualClock(0);
    const overrides = new Map<string, { requestsPerSec: number | null; ordersPerSec: number | null }>();
    const l = new KeyRateLimiter({ defaults: { requestsPerSec: 3, ordersPerSec: 1 }, clock, overridesOf: (id) => overrides.get(id) });
    expect(l.check('a', true)).toBeUndefined();
    const refused = l.check('a', true)!;
    expect(refused.code).toBe('RATE_LIMITED');
    expect(refused.details).toMatchObject({ limit: 'orders', perSecond: 1 });
    expect(l.check('a', false)).toBeUndefined();
    expect(l.check('a', false)).toBeUndefined();
    expect(l.check('a', false)?.details).toMatchObject({ limit: 'requests' });
    overrides.set('a', { requestsPerSec: null, ordersPerSec: 0 });
    l.forget('a');
    expect(l.limitsOf('a')).toEqual({ requestsPerSec: 3, ordersPerSec: 0 });
    for (let i = 0; i < 3; i++) expect(l.check('a', true)).toBeUndefined();
  });
});

describe('over real sockets', () => {
  let t: TestGateway;
  const clock = new ManualClock();
  beforeAll(async () => {
    t = await startTestGateway({ keyRequestsPerSec: 5, keyOrdersPerSec: 2, authFailLimit: 3 }, { clock });
  });
  afterAll(async () => {
    await t.stop();
  });
  const newKey = async (label: string) => (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label } })).body as { id: string; key: string };
  const whoami = (key: string) => t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } });

  it('the request after the limit is 429 RATE_LIMITED with retry-after and RateLimit-* headers; other keys are not affected', async () => {
    const k = await newKey('limited');
    const other = await newKey('other');
    for (let i = 0; i < 5; i++) expect((await whoami(k.key)).status).toBe(200);
    const r = await whoami(k.key);
    expect(r.status).toBe(429);
    expect(r.body).toMatchObject({ error: 'RATE_LIMITED', limit: 'requests', perSecond: 5 });
    expect(r.text).not.toContain(k.key);
    expect(r.headers.get('retry-after')).toBe('1');
    expect(r.headers.get('ratelimit-limit')).toBe('5');
    expect(r.headers.get('ratelimit-remaining')).toBe('0');
    expect(r.headers.get('ratelimit-reset')).toBe('1');
    expect(r.headers.get('ratelimit-policy')).toBe('5;w=1');
    expect((await whoami(other.key)).status).toBe(200);
    clock.advance(199);
    expect((await whoami(k.key)).status).toBe(429);
    clock.advance(1);
    expect((await whoami(k.key)).status).toBe(200);
    expect((await whoami(k.key)).status).toBe(429);
  });

  it('orders per second count trading calls only', async () => {
    const k = await newKey('orders');
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k.key }, body: { user: 'rate-orders', password: 'pw', server: 'Sim-P5-Demo' } })).body.id as string;
    clock.advance(1_000);
    const order = (n: number) => t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=rl-${n}`, { headers: { 'x-api-key': k.key } });
    expect((await order(1)).status).toBe(200);
    expect((await order(2)).status).toBe(200);
    const third = await order(3);
    expect(third.status).toBe(429);
    expect(third.body).toMatchObject({ error: 'RATE_LIMITED', limit: 'orders', perSecond: 2 });
    expect(third.headers.get('ratelimit-limit')).toBe('2');
    // Not an order: still within the 5 requests/s.
    expect((await t.req('GET', `/AccountSummary?id=${id}`, { headers: { 'x-api-key': k.key } })).status).toBe(200);
    clock.advance(500);
    expect((await order(3)).status).toBe(200);
  });

  it("a key's own limits, set through the management API, win over the defaults at once", async () => {
    const k = await newKey('override');
    const put = await t.req('PUT', `/v1/keys/${k.id}/limits`, { headers: mgmt(t.managementKey), body: { requestsPerSec: 1, ordersPerSec: null } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ id: k.id, requestsPerSec: 1, ordersPerSec: null });
    expect((await whoami(k.key)).status).toBe(200);
    expect((await whoami(k.key)).headers.get('ratelimit-limit')).toBe('1');
    await t.req('PUT', `/v1/keys/${k.id}/limits`, { headers: mgmt(t.managementKey), body: { requestsPerSec: 0, ordersPerSec: null } });
    for (let i = 0; i < 20; i++) expect((await whoami(k.key)).status).toBe(200);
    expect((await t.req('PUT', `/v1/keys/${k.id}/limits`, { headers: mgmt(t.managementKey), body: { requestsPerSec: -1, ordersPerSec: null } })).status).toBe(400);
    // PUT sets both: one left out is refused, saying null is the way to the default.
    const half = await t.req('PUT', `/v1/keys/${k.id}/limits`, { headers: mgmt(t.managementKey), body: { ordersPerSec: 20 } });
    expect([half.status, half.body.error]).toEqual([400, 'BAD_REQUEST']);
    expect(half.body.message).toBe("body field 'requestsPerSec': required (a number per second; null: the configured default, 0: unlimited)");
    const audit = (await t.req('GET', '/v1/audit?limit=5', { headers: mgmt(t.managementKey) })).body.entries;
    expect(audit[0]).toMatchObject({ action: 'key.limits', target: k.id, detail: { requestsPerSec: 0, ordersPerSec: null } });
  });

  it("a revoked key's buckets go at once: revoked, replaced, or its seat deleted (not when the LRU of 100,000 gets to them)", async () => {
    const limits = t.gw.services.rateLimits;
    clock.advance(1_000);
    const revoked = await newKey('revoked');
    expect((await whoami(revoked.key)).status).toBe(200);
    expect(limits.has(revoked.id)).toBe(true);
    const held = limits.size;
    expect((await t.req('DELETE', `/v1/keys/${revoked.id}`, { headers: mgmt(t.managementKey) })).status).toBe(200);
    expect(limits.has(revoked.id)).toBe(false);
    expect(limits.size).toBe(held - 1);

    const replaced = await newKey('replaced');
    expect((await whoami(replaced.key)).status).toBe(200);
    const successor = (await t.req('POST', `/v1/keys/${replaced.id}/replace`, { headers: mgmt(t.managementKey), body: {} })).body as { id: string; key: string };
    expect(limits.has(replaced.id)).toBe(false);
    expect((await whoami(successor.key)).status).toBe(200);
    expect(limits.has(successor.id)).toBe(true);

    const seat = (await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} })).body.id as string;
    const scoped = (await t.req('POST', `/v1/seats/${seat}/keys`, { headers: mgmt(t.managementKey), body: { label: 'scoped', accountScoped: true } })).body as { id: string; key: string };
    expect((await whoami(scoped.key)).status).toBe(200);
    expect(limits.has(scoped.id)).toBe(true);
    const removed = await t.req('DELETE', `/v1/seats/${seat}`, { headers: mgmt(t.managementKey) });
    expect(removed.status).toBe(200);
    expect(removed.body.revokedKeys).toEqual([scoped.id]);
    expect(limits.has(scoped.id)).toBe(false);
  });

  it('the failed-auth throttle keeps working beside it, and a rate-limited key is no failed authentication', async () => {
    const k = await newKey('not-a-failure');
    clock.advance(1_000);
    for (let i = 0; i < 12; i++) await whoami(k.key); // 7 of them 429 RATE_LIMITED
    clock.advance(1_000);
    expect((await whoami(k.key)).status).toBe(200);
    const bad = 'tagw_k_0000000000000000_' + 'x'.repeat(43);
    for (let i = 0; i < 3; i++) expect((await whoami(bad)).status).toBe(401);
    const blocked = await whoami(k.key);
    expect(blocked.status).toBe(429);
    expect(blocked.body.error).toBe('AUTH_THROTTLED');
  });
});
