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

// Windows zone names (what Outlook and Exchange write as TZID in .ics exports) of the zones where
// markets and their releases are, mapped to IANA as in CLDR windowsZones.xml (territory 001).
const WINDOWS_ZONES: Record<string, string> = {
  'UTC': 'UTC',
  'Hawaiian Standard Time': 'Pacific/Honolulu',
  'Alaskan Standard Time': 'America/Anchorage',
  'Pacific Standard Time': 'America/Los_Angeles',
  'US Mountain Standard Time': 'America/Phoenix',
  'Mountain Standard Time': 'America/Denver',
  'Central Standard Time': 'America/Chicago',
  'Central Standard Time (Mexico)': 'America/Mexico_City',
  'Canada Central Standard Time': 'America/Regina',
  'Central America Standard Time': 'America/Guatemala',
  'Eastern Standard Time': 'America/New_York',
  'US Eastern Standard Time': 'America/Indiana/Indianapolis',
  'SA Pacific Standard Time': 'America/Bogota',
  'Atlantic Standard Time': 'America/Halifax',
  'Newfoundland Standard Time': 'America/St_Johns',
  'E. South America Standard Time': 'America/Sao_Paulo',
  'Argentina Standard Time': 'America/Argentina/Buenos_Aires',
  'Pacific SA Standard Time': 'America/Santiago',
  'GMT Standard Time': 'Europe/London',
  'Greenwich Standard Time': 'Atlantic/Reykjavik',
  'W. Europe Standard Time': 'Europe/Berlin',
  'Romance Standard Time': 'Europe/Paris',
  'Central Europe Standard Time': 'Europe/Budapest',
  'Central European Standard Time': 'Europe/Warsaw',
  'GTB Standard Time': 'Europe/Bucharest',
  'FLE Standard Time': 'Europe/Kiev',
  'E. Europe Standard Time': 'Europe/Chisinau',
  'Turkey Standard Time': 'Europe/Istanbul',
  'Russian Standard Time': 'Europe/Moscow',
  'Israel Standard Time': 'Asia/Jerusalem',
  'Egypt Standard Time': 'Africa/Cairo',
  'South Africa Standard Time': 'Africa/Johannesburg',
  'W. Central Africa Standard Time': 'Africa/Lagos',
  'Arab Standard Time': 'Asia/Riyadh',
  'Arabian Standard Time': 'Asia/Dubai',
  'Iran Standard Time': 'Asia/Tehran',
  'Pakistan Standard Time': 'Asia/Karachi',
  'India Standard Time': 'Asia/Kolkata',
  'SE Asia Standard Time': 'Asia/Bangkok',
  'Singapore Standard Time': 'Asia/Singapore',
  'China Standard Time': 'Asia/Shanghai',
  'Taipei Standard Time': 'Asia/Taipei',
  'Korea Standard Time': 'Asia/Seoul',
  'Tokyo Standard Time': 'Asia/Tokyo',
  'W. Australia Standard Time': 'Australia/Perth',
  'Cen. Australia Standard Time': 'Australia/Adelaide',
  'E. Australia Standard Time': 'Australia/Brisbane',
  'AUS Eastern Standard Time': 'Australia/Sydney',
  'New Zealand Standard Time': 'Pacific/Auckland',
};
const WINDOWS_BY_LOWER = new Map(Object.entries(WINDOWS_ZONES).map(([k, v]) => [k.toLowerCase(), v]));

/**
 * A zone name as calendar files write it -> a zone name Node knows: an IANA name as is, a Windows
 * name (Outlook's 'Eastern Standard Time') through the table above, an RFC 5545 globally unique
 * name ('/mozilla.org/20070129_1/Europe/London') by its IANA tail. undefined when none fits.
 */
export function resolveTimeZone(name: string): string | undefined {
  const s = name.trim();
  if (!s) return undefined;
  const win = WINDOWS_BY_LOWER.get(s.toLowerCase());
  if (win) return win;
  if (isTimeZone(s)) return s;
  if (s.startsWith('/')) {
    const parts = s.split('/').filter(Boolean);
    for (const n of [3, 2]) {
      const tail = parts.slice(-n).join('/');
      if (parts.length >= n && tail.includes('/') && isTimeZone(tail)) return tail;
    }
  }
  return undefined;
}
