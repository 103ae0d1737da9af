// Failed-auth throttle (SPEC §8): `limit` 401s from one IP within `windowMs` block that IP for
// `blockMs`. Pure apart from the injected clock. "One IP" is an IPv4 address or an IPv6 /64
// (throttleKey: a client rotating its IPv6 address within its /64 is still one client). Per-IP
// state lives in an LRU so a flood of distinct addresses cannot grow memory without bound.
import type { LRUCache } from 'lru-cache';
import { boundedCache } from '../util/boundedCache.js';
import { systemClock, type Clock } from '../util/clock.js';
import { throttleKey } from '../util/ipAddress.js';

/** Re-exported for the callers that took the clock from here before src/util/clock.ts. */
export { systemClock, type Clock };

interface IpState { failures: number[]; blockedUntil: number }

export interface ThrottleOptions { limit: number; windowMs: number; blockMs: number; clock?: Clock; maxIps?: number }

export class AuthThrottle {
  private readonly ips: LRUCache<string, IpState>;
  private readonly clock: Clock;
  /** The latest time any IP stays blocked: while it is past, no lookup (or client address) is needed. */
  private anyBlockedUntil = 0;
  constructor(private readonly opts: ThrottleOptions) {
    this.clock = opts.clock ?? systemClock;
    this.ips = boundedCache(opts.maxIps ?? 100_000);
  }

  /** Cheap pre-check for the hot path: false means no IP at all is blocked now. */
  anyBlocked(): boolean {
    return this.anyBlockedUntil > this.clock.now();
  }

  /** Seconds until the block lifts, or 0 when the IP may proceed. */
  blockedFor(address: string): number {
    const ip = throttleKey(address);
    const s = this.ips.peek(ip);
    if (!s || s.blockedUntil === 0) return 0;
    const left = s.blockedUntil - this.clock.now();
    if (left <= 0) {
      this.ips.delete(ip);
      return 0;
    }
    return Math.ceil(left / 1000);
  }

  /** Records one failed authentication. */
  fail(address: string): void {
    const ip = throttleKey(address);
    const now = this.clock.now();
    let s = this.ips.get(ip);
    if (!s) {
      s = { failures: [], blockedUntil: 0 };
      this.ips.set(ip, s);
    }
    const horizon = now - this.opts.windowMs;
    while (s.failures.length > 0 && s.failures[0]! <= horizon) s.failures.shift();
    s.failures.push(now);
    if (s.failures.length >= this.opts.limit) {
      s.blockedUntil = now + this.opts.blockMs;
      s.failures = [];
      if (s.blockedUntil > this.anyBlockedUntil) this.anyBlockedUntil = s.blockedUntil;
    }
  }
}
