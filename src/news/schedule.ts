// The recurring default schedule: rules such as "NFP, first Friday of the month, 08:30 New York"
// expanded into the events of one week. It keeps /news useful with no calendar export at all
// (this week is never empty) and it is data: config/calendar.json holds the shipped rules and an
// operator can edit them or replace the file with a CSV/ICS export (see docs/news.md).
import { z } from 'zod';
import type { CalendarEvent, Impact } from './types.js';
import { IMPACTS } from './types.js';
import { isTimeZone, zonedToUtc } from './zone.js';

const DAY = 86_400_000;
const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;

const weekday = z.enum(WEEKDAYS);
const month = z.number().int().min(1).max(12);

/** When a rule fires. Dates are local dates in the rule's zone. */
export const whenSchema = z.discriminatedUnion('every', [
  /** Every week on these weekdays. */
  z.object({ every: z.literal('week'), weekdays: z.array(weekday).min(1) }).strict(),
  /** The nth (1..5, or -1 for the last) given weekday of the month. */
  z.object({ every: z.literal('month'), nth: z.number().int().min(-1).max(5).refine((n) => n !== 0), weekday, months: z.array(month).optional() }).strict(),
  /** A day of the month, moved to the next Monday-Friday when it falls on a weekend. */
  z.object({ every: z.literal('monthDay'), day: z.number().int().min(1).max(28), months: z.array(month).optional() }).strict(),
  /** The nth business day (Mon-Fri) of the month. */
  z.object({ every: z.literal('businessDay'), nth: z.number().int().min(1).max(23), months: z.array(month).optional() }).strict(),
]);

export const ruleSchema = z.object({
  title: z.string().min(1),
  country: z.string().min(2).max(4),
  impact: z.enum(IMPACTS),
  /** Local wall-clock time HH:mm in `tz`. */
  time: z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/),
  /** Checked here: an unknown zone would otherwise throw on every expansion (every /news request). */
  tz: z.string().min(1).refine(isTimeZone, 'unknown time zone (an IANA name such as America/New_York)'),
  when: whenSchema,
  /** Shape of the forecast/previous figures, generated deterministically per occurrence. */
  values: z.object({
    center: z.number(),
    spread: z.number().min(0),
    decimals: z.number().int().min(0).max(4).default(1),
    unit: z.string().max(4).default(''),
  }).strict().optional(),
}).strict();
export type Rule = z.infer<typeof ruleSchema>;

export const rulesFileSchema = z.object({ rules: z.array(ruleSchema).min(1) }).strict();

/** Local calendar date (y, m 1-based, d) of day `i` of the week starting at UTC ms `weekStart`. */
function dateOf(ms: number): { y: number; m: number; d: number; dow: number } {
  const dt = new Date(ms);
  return { y: dt.getUTCFullYear(), m: dt.getUTCMonth() + 1, d: dt.getUTCDate(), dow: dt.getUTCDay() };
}

function daysInMonth(y: number, m: number): number {
  return new Date(Date.UTC(y, m, 0)).getUTCDate();
}

function firesOn(rule: Rule, y: number, m: number, d: number, dow: number): boolean {
  const w = rule.when;
  if ('months' in w && w.months && !w.months.includes(m)) return false;
  switch (w.every) {
    case 'week':
      return w.weekdays.includes(WEEKDAYS[dow]!);
    case 'month': {
      if (WEEKDAYS[dow] !== w.weekday) return false;
      if (w.nth > 0) return Math.ceil(d / 7) === w.nth;
      return d + 7 > daysInMonth(y, m);
    }
    case 'monthDay': {
      if (dow === 0 || dow === 6) return false;
      if (d === w.day) return true;
      // Weekend roll: Monday d fires for a target that fell on the Saturday or Sunday before.
      if (dow === 1) return d - 1 === w.day || d - 2 === w.day;
      return false;
    }
    case 'businessDay': {
      if (dow === 0 || dow === 6) return false;
      let n = 0;
      for (let i = 1; i <= d; i++) {
        const wd = new Date(Date.UTC(y, m - 1, i)).getUTCDay();
        if (wd !== 0 && wd !== 6) n++;
      }
      return n === w.nth;
    }
  }
}

/** Small deterministic hash -> [0, 1), so the same occurrence always shows the same figures. */
function unit(seed: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < seed.length; i++) {
    h ^= seed.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return (h >>> 0) / 0x1_0000_0000;
}

function figure(rule: Rule, seed: string): string {
  const v = rule.values;
  if (!v) return '';
  const x = v.center + (unit(seed) * 2 - 1) * v.spread;
  return `${x.toFixed(v.decimals)}${v.unit}`;
}

/**
 * Events of every rule whose local date falls in [weekStart, weekStart + 7 days) once converted
 * to UTC. Local dates one day either side are checked too, since a zone's date can differ from
 * the UTC date (Sydney releases land on the previous UTC day).
 */
export function expandRules(rules: readonly Rule[], weekStart: number): CalendarEvent[] {
  const out: CalendarEvent[] = [];
  const weekEnd = weekStart + 7 * DAY;
  for (const rule of rules) {
    const [hh, mm] = rule.time.split(':').map(Number) as [number, number];
    for (let i = -1; i <= 7; i++) {
      const { y, m, d, dow } = dateOf(weekStart + i * DAY);
      if (!firesOn(rule, y, m, d, dow)) continue;
      const t = zonedToUtc(y, m, d, hh, mm, rule.tz);
      if (t < weekStart || t >= weekEnd) continue;
      const key = `${rule.country}|${rule.title}|${y}-${m}-${d}`;
      out.push({
        title: rule.title,
        country: rule.country,
        impact: rule.impact as Impact,
        time: new Date(t).toISOString(),
        forecast: figure(rule, `${key}|f`),
        previous: figure(rule, `${key}|p`),
      });
    }
  }
  return out;
}
