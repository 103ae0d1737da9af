// Per-API-key rate limits (issue 16 item 5): requests per second, and orders (trading calls) per
// second, each a token bucket whose burst is one second's worth. The defaults come from
// KEY_REQUESTS_PER_SEC / KEY_ORDERS_PER_SEC; a key's own overrides (PUT /v1/keys/{id}/limits) are
// read once when the key is first seen and again after forget(). 0 means unlimited. The failed-auth
// throttle (throttle.ts) is separate and runs before authentication.
import type { LRUCache } from 'lru-cache';
import { boundedCache } from '../util/boundedCache.js';
import { apiError, type ApiError } from '../errors.js';
import type { Clock } from './throttle.js';
import { fullBucket, take, type Bucket } from './tokenBucket.js';

export interface KeyLimits { requestsPerSec: number; ordersPerSec: number }
/** A key's overrides; null: the default. */
export interface KeyLimitOverrides { requestsPerSec: number | null; ordersPerSec: number | null }

interface KeyState { limits: KeyLimits; requests: Bucket; orders: Bucket }

export interface KeyRateLimiterOptions {
  defaults: KeyLimits;
  clock: Clock;
  overridesOf: (keyId: string) => KeyLimitOverrides | undefined;
  maxKeys?: number;
}

export class KeyRateLimiter {
  private readonly keys: LRUCache<string, KeyState>;
  constructor(private readonly opts: KeyRateLimiterOptions) {
    this.keys = boundedCache(opts.maxKeys ?? 100_000);
  }

  /** The limits in force for a key. */
  limitsOf(keyId: string): KeyLimits {
    return this.state(keyId, this.opts.clock.now()).limits;
  }

  /**
   * Counts one request of `keyId` (and one order when `order`). Returns the 429 to answer when
   * over a limit (nothing counted then), undefined otherwise. Allocates only for that 429.
   */
  check(keyId: string, order: boolean): ApiError | undefined {
    const now = this.opts.clock.now();
    const s = this.state(keyId, now);
    const l = s.limits;
    // Orders first: a refused order must not use up a request token either.
    if (order) {
      const wait = take(s.orders, l.ordersPerSec, burstOf(l.ordersPerSec), now);
      if (wait > 0) return limited('orders', l.ordersPerSec, wait);
    }
    const wait = take(s.requests, l.requestsPerSec, burstOf(l.requestsPerSec), now);
    if (wait > 0) {
      if (order && l.ordersPerSec > 0) s.orders.tokens = Math.min(burstOf(l.ordersPerSec), s.orders.tokens + 1); // give the order token back
      return limited('requests', l.requestsPerSec, wait);
    }
    return undefined;
  }

  /** After a key's overrides changed: the next request reads them (and starts with full buckets).
   *  After a key was revoked: its buckets go at once, not when the LRU gets to them. */
  forget(keyId: string): void {
    this.keys.delete(keyId);
  }

  /** Whether buckets are held for `keyId` (its recency unchanged). */
  has(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  /** Keys with buckets held. */
  get size(): number {
    return this.keys.size;
  }

  private state(keyId: string, now: number): KeyState {
    let s = this.keys.get(keyId);
    if (!s) {
      const o = this.opts.overridesOf(keyId);
      const limits = {
        requestsPerSec: o?.requestsPerSec ?? this.opts.defaults.requestsPerSec,
        ordersPerSec: o?.ordersPerSec ?? this.opts.defaults.ordersPerSec,
      };
      s = { limits, requests: fullBucket(burstOf(limits.requestsPerSec), now), orders: fullBucket(burstOf(limits.ordersPerSec), now) };
      this.keys.set(keyId, s);
    }
    return s;
  }
}

/** One second's worth, and at least one token (a limit below 1/s still lets a request through now and then). */
const burstOf = (perSec: number) => Math.max(1, perSec);

/** 429 with retry-after and the IETF draft RateLimit-* fields (draft-ietf-httpapi-ratelimit-headers-07). */
function limited(what: 'requests' | 'orders', perSec: number, waitMs: number): ApiError {
  const seconds = String(Math.max(1, Math.ceil(waitMs / 1000)));
  return apiError('RATE_LIMITED', `this API key's limit of ${perSec} ${what} per second is used up; retry after ${seconds} s`, {
    headers: {
      'retry-after': seconds,
      'ratelimit-limit': String(perSec),
      'ratelimit-remaining': '0',
      'ratelimit-reset': seconds,
      'ratelimit-policy': `${perSec};w=1`,
    },
    details: { limit: what, perSecond: perSec, retryAfterMs: waitMs },
  });
}
