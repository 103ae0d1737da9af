// Wall-clock time in an IANA zone -> UTC, using the ICU data built into Node (no network, no
// dependency). Calendar exports and the recurring schedule are written in local exchange time
// (08:30 New York, 13:15 Frankfurt...), which moves against UTC twice a year.

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** Throws a RangeError for an unknown zone name. */
export function assertTimeZone(tz: string): void {
  formatter(tz);
}

/** True when `tz` is a zone name the ICU data in Node knows (IANA names such as America/New_York, UTC). */
export function isTimeZone(tz: string): boolean {
  try {
    formatter(tz);
    return true;
  } catch {
    return false;
  }
}

/** Offset of `tz` from UTC at a UTC instant, in ms (positive east of Greenwich). */
export function zoneOffsetMs(utcMs: number, tz: string): number {
  if (tz === 'UTC') return 0;
  const parts: Record<string, number> = {};
  for (const p of formatter(tz).formatToParts(new Date(utcMs))) {
    if (p.type !== 'literal') parts[p.type] = Number(p.value);
  }
  const asUtc = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
  return asUtc - Math.floor(utcMs / 1000) * 1000;
}

const DAY = 86_400_000;

/**
 * UTC ms of a local wall-clock time in `tz` (month is 1-based). Around a DST change the usual
 * convention (java.time, Temporal 'compatible', moment): a time in the spring-forward gap does not
 * exist and is shifted forward by the gap (New York 02:30 on the change day -> 03:30 EDT); a time
 * that occurs twice when clocks go back is the first occurrence (01:30 EDT, not 01:30 EST).
 */
export function zonedToUtc(year: number, month: number, day: number, hour: number, minute: number, tz: string): number {
  const wall = Date.UTC(year, month - 1, day, hour, minute);
  // The offsets in force a day either side; a DST change near this time lies between them.
  const before = zoneOffsetMs(wall - DAY, tz);
  const after = zoneOffsetMs(wall + DAY, tz);
  // A candidate instant is right when the zone really has that offset at that instant.
  let best: number | undefined;
  for (const o of before === after ? [before] : [before, after]) {
    const t = wall - o;
    if (zoneOffsetMs(t, tz) === o && (best === undefined || t < best)) best = t;
  }
  // Neither fits: the wall time is in the gap. Read it with the offset before the change.
  return best ?? wall - before;
}
