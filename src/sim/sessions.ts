// Weekly trading/quote sessions on the server clock, as a minute-of-week bitmap so the
// per-segment "is the market open" check is one array read.
import type { WeeklySessions } from '../market/symbols.js';
import type { z } from 'zod';
import type { sessionsSchema } from './config.js';

export const MINUTES_PER_WEEK = 7 * 1440;
const FULL = { fromMin: 0, toMin: 1440 };

export function expandSessions(spec: z.infer<typeof sessionsSchema>): WeeklySessions {
  if (Array.isArray(spec)) return spec;
  switch (spec) {
    case 'always':
      return [[FULL], [FULL], [FULL], [FULL], [FULL], [FULL], [FULL]];
    case 'forex':
      // Monday 00:00 to Friday 23:55 server time (the New York close convention).
      return [[], [FULL], [FULL], [FULL], [FULL], [{ fromMin: 0, toMin: 1435 }], []];
    case 'index': {
      const day = [{ fromMin: 60, toMin: 1435 }];
      return [[], day, day, day, day, day, []];
    }
  }
}

/** 1 where the session is open, indexed by minute of week (0 = Sunday 00:00 server time). */
export function sessionBitmap(week: WeeklySessions): Uint8Array {
  const bits = new Uint8Array(MINUTES_PER_WEEK);
  week.forEach((windows, day) => {
    for (const w of windows) bits.fill(1, day * 1440 + w.fromMin, day * 1440 + w.toMin);
  });
  return bits;
}

/** Minute of week on the server clock for a server-clock epoch ms (1970-01-01 was a Thursday). */
export function minuteOfWeek(serverMs: number): number {
  return (Math.floor(serverMs / 60_000) + 4 * 1440) % MINUTES_PER_WEEK;
}
