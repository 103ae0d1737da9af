// Importers for the calendar exports operators actually have:
//  - CSV in the ForexFactory weekly-export layout (Title,Country,Date,Time,Impact,Forecast,Previous
//    with Date MM-DD-YYYY and Time like 8:30am, in the export's zone, New York by default), or any
//    CSV whose header names those columns, or a single ISO 8601 `time`/`datetime` column;
//  - iCalendar (.ics): VEVENTs with DTSTART (UTC, TZID or floating), SUMMARY, and the country,
//    impact, forecast and previous taken from X- properties, CATEGORIES or DESCRIPTION lines;
//  - our own JSON ({events: [...]}) as written by the import CLI.
// Rows and events that cannot be read are skipped and reported (line or event number, reason), not
// silently dropped, and never cost the rest of the file.
import { z } from 'zod';
import { IMPACTS, parseImpact, type CalendarEvent, type Impact } from './types.js';
import { isTimeZone, resolveTimeZone, zonedToUtc } from './zone.js';

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

function assertZone(timeZone: string): void {
  if (!isTimeZone(timeZone)) throw new Error(`unknown time zone '${timeZone}' (an IANA name such as America/New_York or UTC)`);
}

export function importCsv(text: string, timeZone = 'America/New_York'): ImportResult {
  assertZone(timeZone);
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

/** Content lines with folded continuations joined (RFC 5545 §3.1), each with its first line number. */
function unfoldIcs(text: string): Array<{ text: string; line: number }> {
  const out: Array<{ text: string; line: number }> = [];
  text.replace(/^\uFEFF/, '').split(/\r\n|\n|\r/).forEach((l, i) => {
    if (/^[ \t]/.test(l) && out.length) out[out.length - 1]!.text += l.slice(1);
    else out.push({ text: l, line: i + 1 });
  });
  return out;
}

/** What a VTIMEZONE block says about its TZID: an X-LIC-LOCATION zone name, the offsets it switches to. */
interface VTimezone { location?: string; offsetsMs: Set<number> }

/** '+0530', '-0500', '+013000' -> ms east of Greenwich. */
function parseUtcOffset(v: string): number | null {
  const m = /^([+-])(\d{2})(\d{2})(\d{2})?$/.exec(v.trim());
  if (!m) return null;
  const ms = ((Number(m[2]) * 60 + Number(m[3])) * 60 + Number(m[4] ?? 0)) * 1000;
  return m[1] === '-' ? -ms : ms;
}

type WallToUtc = (y: number, mo: number, d: number, h: number, mi: number) => number;

/**
 * How to read wall-clock times with this TZID: an IANA name, a Windows name (Outlook), the zone its
 * VTIMEZONE names (X-LIC-LOCATION), or the one fixed offset of a VTIMEZONE without DST. Otherwise a
 * reason to skip the event.
 */
function zoneReader(tzid: string | undefined, floatingZone: string, vtz: Map<string, VTimezone>): WallToUtc | string {
  const zone = tzid === undefined ? floatingZone : resolveTimeZone(tzid) ?? resolveTimeZone(vtz.get(tzid.trim())?.location ?? '');
  if (zone) return (y, mo, d, h, mi) => zonedToUtc(y, mo, d, h, mi, zone);
  const block = vtz.get(tzid!.trim());
  if (block?.offsetsMs.size === 1) {
    const off = [...block.offsetsMs][0]!;
    return (y, mo, d, h, mi) => Date.UTC(y, mo - 1, d, h, mi) - off;
  }
  return `unknown TZID '${tzid}'${block ? ' (its VTIMEZONE has daylight-saving rules and names no known zone)' : ''}`;
}

function icsTime(p: IcsProp, floatingZone: string, vtz: Map<string, VTimezone>): number | string {
  const v = p.value.trim();
  const date = /^(\d{4})(\d{2})(\d{2})$/.exec(v);
  const dateTime = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)$/.exec(v);
  const m = date ?? dateTime;
  if (!m) return `bad DTSTART '${v}'`;
  const [y, mo, d, h, mi, sec] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0));
  if (!validDate(y!, mo!, d!) || h! > 23 || mi! > 59 || sec! > 60) return `bad DTSTART '${v}'`;
  if (dateTime?.[7] === 'Z') return Date.UTC(y!, mo! - 1, d!, h!, mi!, sec!);
  const read = zoneReader(p.params.TZID, floatingZone, vtz);
  return typeof read === 'string' ? read : read(y!, mo!, d!, h!, mi!);
}

function descriptionField(desc: string, name: string): string {
  const m = new RegExp(`^\\s*${name}\\s*:\\s*(.*)$`, 'im').exec(desc);
  return m ? m[1]!.trim() : '';
}

/**
 * VEVENTs of an .ics file. One that cannot be read (no DTSTART, a TZID no table or VTIMEZONE
 * explains, no country...) is skipped with its event number and line; the others are kept.
 */
export function importIcs(text: string, timeZone = 'UTC'): ImportResult {
  assertZone(timeZone);
  const lines = unfoldIcs(text);
  // VTIMEZONE blocks first: RFC 5545 does not require them to come before the events using them.
  const vtz = new Map<string, VTimezone>();
  let tzBlock: { tzid?: string; tz: VTimezone } | null = null;
  for (const { text: line } of lines) {
    const t = line.trim();
    if (/^BEGIN:VTIMEZONE$/i.test(t)) tzBlock = { tz: { offsetsMs: new Set() } };
    else if (/^END:VTIMEZONE$/i.test(t)) {
      if (tzBlock?.tzid) vtz.set(tzBlock.tzid, tzBlock.tz);
      tzBlock = null;
    } else if (tzBlock) {
      const p = parseIcsLine(line);
      if (p?.name === 'TZID') tzBlock.tzid = p.value.trim();
      else if (p?.name === 'X-LIC-LOCATION') tzBlock.tz.location = p.value.trim();
      else if (p?.name === 'TZOFFSETTO') {
        const o = parseUtcOffset(p.value);
        if (o !== null) tzBlock.tz.offsetsMs.add(o);
      }
    }
  }
  const events: CalendarEvent[] = [];
  const skipped: string[] = [];
  let cur: IcsProp[] | null = null;
  let startLine = 0;
  let n = 0;
  for (const { text: line, line: lineNo } of lines) {
    if (/^BEGIN:VEVENT$/i.test(line.trim())) {
      cur = [];
      n++;
      startLine = lineNo;
      continue;
    }
    if (/^END:VEVENT$/i.test(line.trim())) {
      if (cur) {
        let r: CalendarEvent | string;
        try {
          r = icsEvent(cur, timeZone, vtz);
        } catch (e) {
          r = e instanceof Error ? e.message : String(e);
        }
        if (typeof r === 'string') skipped.push(`line ${startLine} (event ${n}): ${r}`);
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

function icsEvent(props: IcsProp[], timeZone: string, vtz: Map<string, VTimezone>): CalendarEvent | string {
  const get = (name: string) => props.find((p) => p.name === name);
  const start = get('DTSTART');
  if (!start) return 'no DTSTART';
  const t = icsTime(start, timeZone, vtz);
  if (typeof t === 'string') return t;
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
/** The file's shape only; each event is checked on its own so that one bad event does not drop the file. */
const eventsListSchema = z.object({ events: z.array(z.unknown()) }).strict();

/** One line for a zod error: 'path: message; path: message'. */
export function zodIssues(err: z.ZodError): string {
  return err.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
}

/** A one-line description of an import failure (a zod error is otherwise a multi-line JSON dump). */
export function describeImportError(err: unknown): string {
  if (err instanceof z.ZodError) return zodIssues(err);
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
}

export function importJsonEvents(value: unknown): ImportResult {
  const events: CalendarEvent[] = [];
  const skipped: string[] = [];
  eventsListSchema.parse(value).events.forEach((raw, i) => {
    const r = eventSchema.safeParse(raw);
    if (!r.success) {
      const title = raw && typeof raw === 'object' && typeof (raw as { title?: unknown }).title === 'string' ? ` '${(raw as { title: string }).title}'` : '';
      return void skipped.push(`event ${i + 1}${title}: ${zodIssues(r.error)}`);
    }
    const e = r.data;
    events.push({ ...e, country: e.country.toUpperCase(), time: new Date(parseInstant(e.time)!).toISOString() });
  });
  return { events, skipped };
}
