// Importers for the calendar exports operators actually have:
//  - CSV in the ForexFactory weekly-export layout (Title,Country,Date,Time,Impact,Forecast,Previous
//    with Date MM-DD-YYYY and Time like 8:30am, in the export's zone, New York by default), or any
//    CSV whose header names those columns, or a single ISO 8601 `time`/`datetime` column;
//  - iCalendar (.ics): VEVENTs with DTSTART (UTC, TZID or floating), SUMMARY, and the country,
//    impact, forecast and previous taken from X- properties, CATEGORIES or DESCRIPTION lines;
//  - our own JSON ({events: [...]}) as written by the import CLI.
// Rows that cannot be read are reported, not silently dropped.
import { z } from 'zod';
import { IMPACTS, parseImpact, type CalendarEvent, type Impact } from './types.js';
import { zonedToUtc } from './zone.js';

export interface ImportResult {
  events: CalendarEvent[];
  /** One line per row that was skipped, with its line number and reason. */
  skipped: string[];
}

/** RFC 4180 CSV: quoted fields, doubled quotes, CRLF or LF. */
export function parseCsvRows(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
    } else field += c;
  }
  if (field !== '' || row.length) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.some((f) => f.trim() !== ''));
}

const COLUMN_ALIASES: Record<string, string[]> = {
  title: ['title', 'event', 'name'],
  country: ['country', 'currency', 'cur'],
  date: ['date'],
  time: ['time', 'datetime', 'timestamp'],
  impact: ['impact', 'importance'],
  forecast: ['forecast', 'consensus'],
  previous: ['previous', 'prev', 'prior'],
};

/** "8:30am", "12:00pm", "14:15" -> [h, m]; "All Day", "Tentative", "" -> midnight. */
function parseClock(raw: string): [number, number] | null {
  const s = raw.trim().toLowerCase();
  if (s === '' || s === 'all day' || s === 'tentative' || s.startsWith('day ')) return [0, 0];
  const m = /^(\d{1,2}):(\d{2})\s*(am|pm)?$/.exec(s);
  if (!m) return null;
  let h = Number(m[1]);
  const min = Number(m[2]);
  if (m[3]) {
    if (h < 1 || h > 12) return null;
    if (m[3] === 'am') h = h === 12 ? 0 : h;
    else h = h === 12 ? 12 : h + 12;
  }
  if (h > 23 || min > 59) return null;
  return [h, min];
}

/** MM-DD-YYYY (ForexFactory), YYYY-MM-DD, or MM/DD/YYYY. */
function parseDate(raw: string): [number, number, number] | null {
  const s = raw.trim();
  let m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (m) return [Number(m[1]), Number(m[2]), Number(m[3])];
  m = /^(\d{1,2})[-/](\d{1,2})[-/](\d{4})$/.exec(s);
  if (m) return [Number(m[3]), Number(m[1]), Number(m[2])];
  return null;
}

function validDate(y: number, mo: number, d: number): boolean {
  const dt = new Date(Date.UTC(y, mo - 1, d));
  return dt.getUTCFullYear() === y && dt.getUTCMonth() === mo - 1 && dt.getUTCDate() === d;
}

/** An ISO 8601 instant with an explicit zone (Z or +hh:mm). */
function parseInstant(raw: string): number | null {
  const s = raw.trim();
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/.test(s)) return null;
  const t = Date.parse(s);
  return Number.isFinite(t) ? t : null;
}

export function importCsv(text: string, timeZone = 'America/New_York'): ImportResult {
  const rows = parseCsvRows(text.replace(/^\uFEFF/, ''));
  const events: CalendarEvent[] = [];
  const skipped: string[] = [];
  if (rows.length === 0) return { events, skipped };
  const header = rows[0]!.map((h) => h.trim().toLowerCase());
  const col: Record<string, number> = {};
  for (const [name, aliases] of Object.entries(COLUMN_ALIASES)) {
    const i = header.findIndex((h) => aliases.includes(h));
    if (i >= 0) col[name] = i;
  }
  for (const need of ['title', 'country', 'time', 'impact']) {
    if (col[need] === undefined) throw new Error(`CSV header lacks a '${need}' column (found: ${header.join(', ')})`);
  }
  rows.slice(1).forEach((r, idx) => {
    const line = idx + 2;
    const get = (name: string) => (col[name] === undefined ? '' : (r[col[name]!] ?? '').trim());
    const title = get('title');
    const country = get('country').toUpperCase();
    const impact = parseImpact(get('impact'));
    if (!title || !country) return void skipped.push(`line ${line}: missing title or country`);
    if (!impact) return void skipped.push(`line ${line}: unknown impact '${get('impact')}'`);
    let t: number | null;
    if (col.date !== undefined) {
      const date = parseDate(get('date'));
      const clock = parseClock(get('time'));
      if (!date || !validDate(...date)) return void skipped.push(`line ${line}: bad date '${get('date')}'`);
      if (!clock) return void skipped.push(`line ${line}: bad time '${get('time')}'`);
      t = zonedToUtc(date[0], date[1], date[2], clock[0], clock[1], timeZone);
    } else {
      t = parseInstant(get('time'));
      if (t === null) return void skipped.push(`line ${line}: time '${get('time')}' is not an ISO 8601 instant with a zone`);
    }
    events.push({ title, country, impact, time: new Date(t).toISOString(), forecast: get('forecast'), previous: get('previous') });
  });
  return { events, skipped };
}

// ---- iCalendar --------------------------------------------------------------------------

interface IcsProp { name: string; params: Record<string, string>; value: string }

function unescapeIcs(v: string): string {
  return v.replace(/\\n/gi, '\n').replace(/\\([,;\\])/g, '$1');
}

function parseIcsLine(line: string): IcsProp | null {
  const colon = line.search(/:(?=(?:[^"]*"[^"]*")*[^"]*$)/);
  if (colon < 0) return null;
  const [name, ...paramParts] = line.slice(0, colon).split(';');
  const params: Record<string, string> = {};
  for (const p of paramParts) {
    const eq = p.indexOf('=');
    if (eq > 0) params[p.slice(0, eq).toUpperCase()] = p.slice(eq + 1).replace(/^"|"$/g, '');
  }
  return { name: name!.toUpperCase(), params, value: line.slice(colon + 1) };
}

function icsTime(p: IcsProp, defaultZone: string): number | null {
  const v = p.value.trim();
  let m = /^(\d{4})(\d{2})(\d{2})$/.exec(v);
  if (m) return zonedToUtc(Number(m[1]), Number(m[2]), Number(m[3]), 0, 0, p.params.TZID ?? defaultZone);
  m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)$/.exec(v);
  if (!m) return null;
  const [y, mo, d, h, mi] = [1, 2, 3, 4, 5].map((i) => Number(m![i]));
  if (m[7] === 'Z') return Date.UTC(y!, mo! - 1, d!, h!, mi!, Number(m[6]));
  return zonedToUtc(y!, mo!, d!, h!, mi!, p.params.TZID ?? defaultZone);
}

function descriptionField(desc: string, name: string): string {
  const m = new RegExp(`^\\s*${name}\\s*:\\s*(.*)$`, 'im').exec(desc);
  return m ? m[1]!.trim() : '';
}

export function importIcs(text: string, timeZone = 'UTC'): ImportResult {
  // Unfold continuation lines (RFC 5545 §3.1).
  const lines = text.replace(/\r\n/g, '\n').replace(/\n[ \t]/g, '').split('\n');
  const events: CalendarEvent[] = [];
  const skipped: string[] = [];
  let cur: IcsProp[] | null = null;
  let n = 0;
  for (const line of lines) {
    if (/^BEGIN:VEVENT$/i.test(line.trim())) {
      cur = [];
      n++;
      continue;
    }
    if (/^END:VEVENT$/i.test(line.trim())) {
      if (cur) {
        const r = icsEvent(cur, timeZone);
        if (typeof r === 'string') skipped.push(`event ${n}: ${r}`);
        else events.push(r);
      }
      cur = null;
      continue;
    }
    if (cur) {
      const p = parseIcsLine(line);
      if (p) cur.push(p);
    }
  }
  return { events, skipped };
}

function icsEvent(props: IcsProp[], timeZone: string): CalendarEvent | string {
  const get = (name: string) => props.find((p) => p.name === name);
  const start = get('DTSTART');
  if (!start) return 'no DTSTART';
  const t = icsTime(start, timeZone);
  if (t === null) return `bad DTSTART '${start.value}'`;
  let title = unescapeIcs(get('SUMMARY')?.value ?? '').trim();
  const desc = unescapeIcs(get('DESCRIPTION')?.value ?? '');
  let country = (get('X-COUNTRY')?.value ?? descriptionField(desc, 'country') ?? '').trim().toUpperCase();
  if (!country) {
    const cat = get('CATEGORIES')?.value.split(',')[0]?.trim() ?? '';
    if (/^[A-Za-z]{3}$/.test(cat)) country = cat.toUpperCase();
  }
  // "USD - Non-Farm Employment Change" / "[USD] CPI m/m"
  const prefix = /^\[?([A-Z]{3})\]?\s*[-:]?\s+(.+)$/.exec(title);
  if (prefix) {
    country ||= prefix[1]!;
    if (prefix[1] === country) title = prefix[2]!.trim();
  }
  // Stars or an impact word at the end of the summary.
  let impact: Impact | undefined = parseImpact(get('X-IMPACT')?.value ?? '') ?? parseImpact(descriptionField(desc, 'impact'));
  const stars = /\s*\(?(★{1,3}|\*{1,3}|high|medium|low)\)?$/i.exec(title);
  if (stars) {
    impact ??= parseImpact(stars[1]!);
    title = title.slice(0, stars.index).trim();
  }
  if (!impact) {
    const prio = Number(get('PRIORITY')?.value ?? '0');
    if (prio >= 1 && prio <= 4) impact = 'High';
    else if (prio === 5) impact = 'Medium';
    else if (prio >= 6) impact = 'Low';
  }
  if (!title) return 'no SUMMARY';
  if (!country) return `no country for '${title}' (X-COUNTRY, CATEGORIES or a currency prefix in SUMMARY)`;
  return {
    title, country, impact: impact ?? 'Low', time: new Date(t).toISOString(),
    forecast: (get('X-FORECAST')?.value ?? descriptionField(desc, 'forecast')).trim(),
    previous: (get('X-PREVIOUS')?.value ?? descriptionField(desc, 'previous')).trim(),
  };
}

// ---- our JSON ------------------------------------------------------------------------------

export const eventSchema = z.object({
  title: z.string().min(1),
  country: z.string().min(2).max(4),
  impact: z.enum(IMPACTS),
  time: z.string().refine((s) => parseInstant(s) !== null, 'ISO 8601 instant with a zone'),
  forecast: z.string().default(''),
  previous: z.string().default(''),
}).strict();
export const eventsFileSchema = z.object({ events: z.array(eventSchema) }).strict();

export function importJsonEvents(value: unknown): ImportResult {
  const r = eventsFileSchema.parse(value);
  return {
    events: r.events.map((e) => ({ ...e, country: e.country.toUpperCase(), time: new Date(parseInstant(e.time)!).toISOString() })),
    skipped: [],
  };
}
