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

/** UTC ms of a local wall-clock time in `tz` (month is 1-based). */
export function zonedToUtc(year: number, month: number, day: number, hour: number, minute: number, tz: string): number {
  const wall = Date.UTC(year, month - 1, day, hour, minute);
  const first = wall - zoneOffsetMs(wall, tz);
  const second = wall - zoneOffsetMs(first, tz);
  return second;
}
