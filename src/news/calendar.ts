// The economic calendar behind /news. Source: one file the operator can replace at any time
// (checked by mtime on each request, so no restart is needed):
//   *.json with {rules: [...]}  recurring schedule (the shipped config/calendar.json),
//   *.json with {events: [...]} explicit events (what the import CLI writes),
//   *.csv                       ForexFactory-style export,
//   *.ics                       iCalendar export.
// A week with no event in the file (a stale export, a missing file) falls back to the built-in
// recurring schedule, so this week is never empty. Nothing here touches the network.
import { readFileSync, statSync } from 'node:fs';
import { extname } from 'node:path';
import type { Logger } from '../log.js';
import { DEFAULT_RULES } from './defaultRules.js';
import { describeImportError, importCsv, importIcs, importJsonEvents } from './importers.js';
import { expandRules, rulesFileSchema, type Rule } from './schedule.js';
import type { CalendarEvent, Impact } from './types.js';

const DAY = 86_400_000;

/** Start of the calendar week containing `utcMs`: Sunday 00:00 UTC (the FX week opens Sunday evening). */
export function weekStartOf(utcMs: number): number {
  const dayStart = Math.floor(utcMs / DAY) * DAY;
  return dayStart - new Date(dayStart).getUTCDay() * DAY;
}

export type CalendarSource = 'file' | 'rules' | 'default-rules';

interface Loaded {
  mtimeMs: number;
  events?: CalendarEvent[];
  rules?: Rule[];
}

export function loadCalendarFile(path: string, timeZone: string): { events?: CalendarEvent[]; rules?: Rule[]; skipped: string[] } {
  const text = readFileSync(path, 'utf8');
  const ext = extname(path).toLowerCase();
  if (ext === '.csv') return importCsv(text, timeZone);
  if (ext === '.ics' || ext === '.ical') return importIcs(text, timeZone);
  const json = JSON.parse(text) as unknown;
  if (json && typeof json === 'object' && 'rules' in json) return { rules: rulesFileSchema.parse(json).rules, skipped: [] };
  return importJsonEvents(json);
}

export interface NewsFilter {
  countries?: readonly string[];
  impacts?: readonly Impact[];
}

export class Calendar {
  private loaded: Loaded | null = null;
  private failedMtime = -1;
  /** The file's absence was logged (once, until it appears). */
  private missingSaid = false;

  constructor(
    private readonly file: string | undefined,
    private readonly timeZone: string,
    private readonly log: Logger,
  ) {}

  private current(): Loaded | null {
    if (!this.file) return null;
    let mtimeMs: number;
    try {
      mtimeMs = statSync(this.file).mtimeMs;
    } catch {
      if (this.loaded) this.log.warn('calendar file disappeared; using the built-in schedule', { file: this.file });
      // Never there (a misspelt CALENDAR_FILE, a start from another directory than the default's
      // ./config): said once, where it was served in silence.
      else if (!this.missingSaid) this.log.warn('calendar file not found; /news serves the built-in schedule (CALENDAR_FILE)', { file: this.file });
      this.missingSaid = true;
      this.loaded = null;
      return null;
    }
    this.missingSaid = false;
    if (this.loaded?.mtimeMs === mtimeMs) return this.loaded;
    if (this.failedMtime === mtimeMs) return this.loaded;
    try {
      const r = loadCalendarFile(this.file, this.timeZone);
      if (r.skipped.length) this.log.warn('calendar rows skipped', { file: this.file, count: r.skipped.length, first: r.skipped.slice(0, 5) });
      this.loaded = { mtimeMs, ...(r.events ? { events: r.events } : {}), ...(r.rules ? { rules: r.rules } : {}) };
      this.log.info('calendar loaded', { file: this.file, events: r.events?.length, rules: r.rules?.length });
    } catch (e) {
      // Keep serving what was loaded before; a half-written replacement must not blank /news.
      this.failedMtime = mtimeMs;
      this.log.error('calendar file unreadable; keeping the previous calendar', { file: this.file, err: describeImportError(e) });
    }
    return this.loaded;
  }

  /** This week's events (the week containing `nowMs`), sorted by time, then filtered. */
  week(nowMs: number, filter: NewsFilter = {}): { events: CalendarEvent[]; source: CalendarSource; weekStart: number } {
    const start = weekStartOf(nowMs);
    const end = start + 7 * DAY;
    const src = this.current();
    let events: CalendarEvent[] = [];
    let source: CalendarSource = 'default-rules';
    if (src?.events) {
      events = src.events.filter((e) => {
        const t = Date.parse(e.time);
        return t >= start && t < end;
      });
      source = 'file';
    } else if (src?.rules) {
      events = expandRules(src.rules, start);
      source = 'rules';
    }
    if (events.length === 0) {
      events = expandRules(DEFAULT_RULES, start);
      source = 'default-rules';
    }
    events.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : a.country.localeCompare(b.country)));
    const countries = filter.countries?.length ? new Set(filter.countries.map((c) => c.toUpperCase())) : null;
    const impacts = filter.impacts?.length ? new Set(filter.impacts) : null;
    return {
      events: events.filter((e) => (!countries || countries.has(e.country.toUpperCase())) && (!impacts || impacts.has(e.impact))),
      source,
      weekStart: start,
    };
  }
}
