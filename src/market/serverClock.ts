// Broker server clocks. MT-class brokers run their servers on a non-UTC clock (commonly
// "New York close": UTC+2, UTC+3 while US DST is in effect), so D1 bars open at 17:00 New
// York time. All pure; the offset lookup caches the current DST interval because candle
// building asks for it on every tick.
import type { DstRule, ServerInfo, ServerTimeZone } from './server.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** UTC ms of the n-th (1-based) Sunday of month (0-based) in year, at 00:00 UTC. */
function nthSunday(year: number, month: number, n: number): number {
  const first = Date.UTC(year, month, 1);
  const dow = new Date(first).getUTCDay();
  return first + (((7 - dow) % 7) + (n - 1) * 7) * DAY;
}
function lastSunday(year: number, month: number): number {
  const last = Date.UTC(year, month + 1, 0);
  const dow = new Date(last).getUTCDay();
  return last - dow * DAY;
}

/** [start, end) of daylight saving time in UTC ms for a year, or null. */
export function dstInterval(rule: DstRule, year: number): readonly [number, number] | null {
  switch (rule) {
    case 'none':
      return null;
    case 'US':
      // 02:00 local: EST (UTC-5) -> 07:00 UTC in March; EDT (UTC-4) -> 06:00 UTC in November.
      return [nthSunday(year, 2, 2) + 7 * HOUR, nthSunday(year, 10, 1) + 6 * HOUR];
    case 'EU':
      return [lastSunday(year, 2) + HOUR, lastSunday(year, 9) + HOUR];
  }
}

/** Offset of the server clock from UTC in minutes at a UTC instant. */
export function utcOffsetMinutes(tz: ServerTimeZone, utcMs: number): number {
  const dst = dstInterval(tz.dst, new Date(utcMs).getUTCFullYear());
  const inDst = dst !== null && utcMs >= dst[0] && utcMs < dst[1];
  return tz.standardOffsetMinutes + (inDst ? 60 : 0);
}

/** Server-clock "epoch ms" (UTC + offset), the number MT terminals show as server time. */
export function toServerTime(utcMs: number, server: ServerInfo | ServerTimeZone): number {
  const tz = 'timeZone' in server ? server.timeZone : server;
  return utcMs + utcOffsetMinutes(tz, utcMs) * 60_000;
}

/** Inverse of toServerTime. Around a backward DST switch one server time maps to two UTC
 *  instants; the earlier (still-DST) one is returned. */
export function fromServerTime(serverMs: number, server: ServerInfo | ServerTimeZone): number {
  const tz = 'timeZone' in server ? server.timeZone : server;
  const dstGuess = serverMs - (tz.standardOffsetMinutes + 60) * 60_000;
  if (tz.dst !== 'none' && toServerTime(dstGuess, tz) === serverMs) return dstGuess;
  return serverMs - tz.standardOffsetMinutes * 60_000;
}

/** The last millisecond of year 9999 UTC: later times have no calendar date (ISO 8601 years are 4 digits). */
export const LATEST_TIME_MS = 253_402_300_799_999;

/** Cached offset lookup for hot paths: recomputes only when the instant leaves the interval
 *  over which the last answer is valid. */
export class ServerClock {
  private validFrom = 1;
  private validTo = 0;
  private offsetMs = 0;
  constructor(readonly tz: ServerTimeZone) {}

  offsetMsAt(utcMs: number): number {
    if (utcMs >= this.validFrom && utcMs < this.validTo) return this.offsetMs;
    const year = new Date(utcMs).getUTCFullYear();
    const yearStart = Date.UTC(year, 0, 1);
    const yearEnd = Date.UTC(year + 1, 0, 1);
    const dst = dstInterval(this.tz.dst, year);
    const std = this.tz.standardOffsetMinutes * 60_000;
    if (dst === null) {
      this.set(yearStart, yearEnd, std);
    } else if (utcMs < dst[0]) {
      this.set(yearStart, dst[0], std);
    } else if (utcMs < dst[1]) {
      this.set(dst[0], dst[1], std + HOUR);
    } else {
      this.set(dst[1], yearEnd, std);
    }
    return this.offsetMs;
  }

  toServer(utcMs: number): number {
    return utcMs + this.offsetMsAt(utcMs);
  }

  private set(from: number, to: number, offset: number): void {
    this.validFrom = from;
    this.validTo = to;
    this.offsetMs = offset;
  }
}

const clocks = new WeakMap<ServerTimeZone, ServerClock>();
/** The (cached) clock of a server's time zone. Keyed by the zone object: a connection that learns
 *  its server again (a bridge at each login) gets a clock of what it learned, never a stale one. */
export function clockFor(server: ServerInfo | ServerTimeZone): ServerClock {
  const tz = 'timeZone' in server ? server.timeZone : server;
  let c = clocks.get(tz);
  if (!c) clocks.set(tz, (c = new ServerClock(tz)));
  return c;
}
