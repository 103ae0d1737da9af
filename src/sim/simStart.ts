// SIM_START / `npm run sim -- --start`: the instant a simulator's clock starts at (docs/simulator.md,
// "Starting the market at a fixed instant"). Only the value's form is here; the offset from the wall
// clock is fixed and kept in the data directory by src/store/simClock.ts.
import { LATEST_TIME_MS, toServerTime } from '../market/serverClock.js';
import type { SimConfig } from './config.js';
import { expandSessions, minuteOfWeek, sessionBitmap } from './sessions.js';

/** A date, a time and a zone (Z or ±hh:mm): `2026-11-20T10:00:00Z`, `2026-11-20T12:00+02:00`. */
const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

export const SIM_START_FORM = 'an ISO 8601 instant with its zone, e.g. 2026-11-20T10:00:00Z';

/** The UTC ms of an ISO instant, or why it is not one. A local time without a zone is refused (it
 *  would mean another instant on every machine), as is a date that does not exist (2026-02-30). */
export function parseSimStart(value: string): { ms: number } | { problem: string } {
  const m = ISO_INSTANT.exec(value.trim());
  if (!m) return { problem: `'${value}' is not ${SIM_START_FORM}` };
  const ms = Date.parse(value.trim());
  // Date.parse rolls 2026-02-30 over to March: the fields must survive the round trip.
  const [y, mo, d, h, mi, s] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number) as [number, number, number, number, number, number];
  const probe = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  const exists = probe.getUTCFullYear() === y && probe.getUTCMonth() === mo - 1 && probe.getUTCDate() === d && h < 24 && mi < 60 && s < 60;
  if (!Number.isFinite(ms) || !exists) return { problem: `'${value}' is not a date and time that exists` };
  if (ms < 0 || ms > LATEST_TIME_MS) return { problem: `'${value}' is outside 1970-01-01 to 9999-12-31` };
  return { ms };
}

/** The symbols whose quote session is closed at a UTC instant (`Server:SYMBOL`): what a SIM_START on a
 *  weekend (or in an index's daily break) opens into. Empty when every symbol quotes then. */
export function closedAt(config: SimConfig, utcMs: number): string[] {
  const out: string[] = [];
  for (const server of config.servers) {
    const minute = minuteOfWeek(toServerTime(utcMs, server.timeZone));
    for (const s of server.symbols) if (sessionBitmap(expandSessions(s.quoteSessions))[minute] !== 1) out.push(`${server.name}:${s.name}`);
  }
  return out;
}
