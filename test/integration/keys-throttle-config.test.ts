import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AuthThrottle } from '../../src/auth/throttle.js';
import { generateKey, parseKey, secretMatches, hashSecret } from '../../src/auth/keys.js';
import { ConfigError, loadConfig, parseConfig } from '../../src/config.js';
import { ERROR_STATUS, apiError, fromWire, toApiError, toWire } from '../../src/errors.js';
import { createLogger, redact } from '../../src/log.js';
import { parseQuery } from '../../src/http/request.js';
import { positiveInt, utc } from '../../src/runtime/hosts/accountOps.js';
import { paramsHash } from '../../src/runtime/hosts/accountTrade.js';
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { qBool, qInt, qList, qNumber } from '../../src/http/schemas.js';
import { ManualClock } from '../helpers/gateway.js';

describe('keys', () => {
  it('round-trips generated keys and matches only the right secret', () => {
    for (const kind of ['api', 'management'] as const) {
      const k = generateKey(kind);
      const p = parseKey(k.value)!;
      expect(p).toEqual({ kind, id: k.id, secret: k.secret });
      expect(secretMatches(k.secret, hashSecret(k.secret))).toBe(true);
      expect(secretMatches(k.secret + 'x', hashSecret(k.secret))).toBe(false);
    }
    expect(parseKey('tagw_k_short')).toBeUndefined();
    expect(parseKey('')).toBeUndefined();
  });
});

describe('throttle', () => {
  it('property: an IP is blocked iff it had `limit` failures within the window, for blockMs', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 30_000 }), { maxLength: 40 }), (gaps) => {
        const clock = new ManualClock(0);
        const th = new AuthThrottle({ limit: 5, windowMs: 60_000, blockMs: 120_000, clock });
        const times: number[] = [];
        let blockedUntil = 0;
        for (const g of gaps) {
          clock.advance(g);
          const now = clock.now();
          const expectBlocked = now < blockedUntil;
          expect(th.blockedFor('ip') > 0).toBe(expectBlocked);
          if (expectBlocked) continue; // blocked requests are refused before authentication
          th.fail('ip');
          times.push(now);
          const recent = times.filter((t) => t > now - 60_000);
          if (recent.length >= 5) {
            blockedUntil = now + 120_000;
            times.length = 0;
          }
        }
      }),
    );
  });
});

describe('config', () => {
  it('defaults make a fresh start work', () => {
    const c = parseConfig({});
    expect(c).toMatchObject({ port: 8080, dataDir: './data', allowUwsFallback: false, trustProxy: false, authFailLimit: 40 });
  });
  it('leaves a core to the main thread: one shard fewer than cores, at least one', () => {
    expect(parseConfig({}).shards).toBe(Math.max(1, availableParallelism() - 1));
    expect(loadConfig({ SHARDS: '3' }).shards).toBe(3);
  });
  it('reads env vars and names the bad field', () => {
    expect(loadConfig({ PORT: '9001', ALLOW_UWS_FALLBACK: '1', TRUST_PROXY: 'true' })).toMatchObject({ port: 9001, allowUwsFallback: true, trustProxy: true });
    expect(loadConfig({}).subscriptionWaitMs).toBe(1_000);
    expect(loadConfig({ SUBSCRIPTION_WAIT_MS: '250' }).subscriptionWaitMs).toBe(250);
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/port/);
    expect(() => loadConfig({ GATEWAY_MANAGEMENT_KEY: 'short' })).toThrow(/managementKey/);
  });
});

describe('errors', () => {
  it('every code maps to one status and survives the thread boundary', () => {
    for (const code of Object.keys(ERROR_STATUS) as (keyof typeof ERROR_STATUS)[]) {
      const e = fromWire(toWire(apiError(code, 'm')));
      expect(e.status).toBe(ERROR_STATUS[code]);
      expect(e.toBody()).toMatchObject({ error: code, message: 'm' });
    }
    const internal = toApiError(new Error('db path /secret/x'));
    expect(internal.status).toBe(500);
    expect(internal.message).not.toContain('/secret/x');
  });
});

describe('logs', () => {
  it('redact secret-looking fields at any depth', () => {
    const lines: string[] = [];
    const log = createLogger('info', {}, (l) => lines.push(l));
    log.info('x', { password: 'hunter2', nested: { apiKey: 'k1', 'x-api-key': 'k2', authorization: 'Bearer z' }, ok: 1 });
    expect(lines[0]).not.toMatch(/hunter2|k1|k2|Bearer z/);
    expect(JSON.parse(lines[0]!)).toMatchObject({ ok: 1, password: '[redacted]' });
    expect(redact([{ secret: 1 }])).toEqual([{ secret: '[redacted]' }]);
    log.debug('hidden');
    expect(lines).toHaveLength(1);
  });
});

describe('query parsing', () => {
  it('repeated keys become arrays; lists accept both forms', () => {
    const q = parseQuery('symbol=EURUSD&symbol=GBPUSD&symbols=USDJPY,XAUUSD&id=1');
    expect(q.symbol).toEqual(['EURUSD', 'GBPUSD']);
    expect(qList().parse(q.symbol)).toEqual(['EURUSD', 'GBPUSD']);
    expect(qList().parse(q.symbols)).toEqual(['USDJPY', 'XAUUSD']);
  });
  it('numbers and booleans are strict', () => {
    expect(qInt().parse('42')).toBe(42);
    expect(qInt().safeParse('4.2').success).toBe(false);
    expect(qInt().safeParse('').success).toBe(false);
    expect(qNumber().parse('0.01')).toBe(0.01);
    expect(qNumber().safeParse('abc').success).toBe(false);
    expect(qNumber().safeParse('').success).toBe(false);
    expect(qBool().parse('true')).toBe(true);
    expect(qBool().parse('0')).toBe(false);
    expect(qBool().safeParse('maybe').success).toBe(false);
  });
  it('numbers are plain decimals: no hex, binary, octal, Infinity; integers stay exact', () => {
    for (const v of ['0x1', '0b1', '0o7', 'Infinity', '-Infinity', '1e400', 'NaN', '1_000', '1,5']) expect(qNumber().safeParse(v).success, v).toBe(false);
    for (const [v, n] of [['1', 1], ['-0.5', -0.5], ['.5', 0.5], ['1.', 1], ['2e-2', 0.02], ['+3', 3]] as const) expect(qNumber().parse(v)).toBe(n);
    expect(qInt().safeParse('99999999999999999999999').success).toBe(false);
    expect(qInt().parse(String(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    for (const v of ['0x186A3', '1e5', '1.0', '-1', '0', '99999999999999999999999', '']) expect(positiveInt(v), v).toBeUndefined();
    expect(positiveInt('100003')).toBe(100003);
    expect(positiveInt(100003)).toBe(100003);
  });
});

describe('query string parsing matches URLSearchParams', () => {
  it('property: same keys and values, repeats as arrays', () => {
    const part = fc.stringMatching(/^[A-Za-z0-9%+=,._~ -]{0,8}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(part, part, fc.boolean()), { maxLength: 8 }), (pairs) => {
        const raw = pairs.map(([k, v, bare]) => (bare ? encodeURIComponent(k) : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)).join('&');
        const expected: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>;
        for (const [k, v] of new URLSearchParams(raw)) {
          const prev = expected[k];
          expected[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
        }
        expect({ ...parseQuery(raw) }).toEqual({ ...expected });
      }),
    );
    expect({ ...parseQuery('a=1+2&b=%E2%82%AC&c&d=%zz') }).toEqual({ a: '1 2', b: '€', c: '', d: '%zz' });
    // Keys that name Object.prototype members are plain keys.
    expect(parseQuery('valueOf=1&__proto__=x&constructor=y')).toMatchObject({ valueOf: '1', constructor: 'y' });
    expect(Object.getPrototypeOf(parseQuery('__proto__=x'))).toBeNull();
  });
});

describe('UTC siblings of broker times (classic answers)', () => {
  const iso = (ms: number) => new Date(ms).toISOString();
  // The plain definition: every `timeMsc` / `...TimeMsc` number gets an ISO sibling without `Msc`,
  // a positive `expiration` an `expirationTime`, recursively.
  const reference = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(reference);
    if (v === null || typeof v !== 'object') return v;
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      out[k] = reference(x);
      if (typeof x === 'number' && /(^t|T)imeMsc$/.test(k)) out[k.slice(0, -3)] = iso(x);
      if (k === 'expiration' && typeof x === 'number' && x > 0) out.expirationTime = iso(x);
    }
    return out;
  };
  it('matches the plain definition on any nesting of records, lists and values', () => {
    const key = fc.constantFrom('timeMsc', 'openTimeMsc', 'closeTimeMsc', 'timeSetupMsc', 'xtimeMsc', 'TimeMsc', 'expiration', 'ticket', 'time', 'symbol', 'toString', '__proto__x');
    const leaf = fc.oneof(fc.integer({ min: -1, max: 4_102_444_800_000 }), fc.string(), fc.boolean(), fc.constant(null));
    const tree = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(key, tie('node'), { maxKeys: 6 })),
    })).node;
    fc.assert(fc.property(tree, (v) => {
      expect(utc(v)).toEqual(reference(v));
    }));
  });
  it('a time with no calendar date gets a null sibling, never a throw that fails the whole answer', () => {
    expect(utc({ expiration: 8_640_000_000_000_001, openTimeMsc: Number.NaN, ticket: 5 })).toEqual({
      expiration: 8_640_000_000_000_001, expirationTime: null, openTimeMsc: Number.NaN, openTime: null, ticket: 5,
    });
  });
});

describe('idempotency parameter hash', () => {
  it('is the SHA-256 of the canonical parameters, key order aside (records written before stay comparable)', () => {
    fc.assert(fc.property(fc.dictionary(fc.constantFrom('symbol', 'type', 'volume', 'price', 'magic', 'comment'), fc.oneof(fc.string(), fc.double({ noNaN: true }))), (params) => {
      const sorted = Object.fromEntries(Object.keys(params).sort().map((k) => [k, params[k]]));
      const expected = createHash('sha256').update(JSON.stringify(['OrderSend', sorted])).digest('base64url');
      expect(paramsHash('OrderSend', params)).toBe(expected);
      expect(paramsHash('OrderSend', Object.fromEntries(Object.entries(params).reverse()))).toBe(expected);
    }));
  });
});
