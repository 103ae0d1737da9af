import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { DEFAULT_RULES } from '../../src/news/defaultRules.js';
import { importCsv, importIcs, importJsonEvents } from '../../src/news/importers.js';
import { expandRules } from '../../src/news/schedule.js';
import { weekStartOf } from '../../src/news/calendar.js';
import { zonedToUtc } from '../../src/news/zone.js';
import { builtCli, builtEntry } from '../helpers/build.js';
import { ManualClock, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

// Wednesday 4 March 2026, 12:00 UTC: the week of Sun 1 March to Sat 7 March holds the first
// Friday of the month (NFP), ISM PMIs, claims; US DST starts Sunday 8 March (the next week).
const NOW = Date.UTC(2026, 2, 4, 12, 0);
const WEEK = weekStartOf(NOW);

async function apiKey(t: TestGateway): Promise<string> {
  const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
  const key = await t.req('POST', `/v1/seats/${seat.body.id}/keys`, { headers: mgmt(t.managementKey), body: { label: 'news' } });
  expect(key.status).toBe(201);
  return key.body.key as string;
}

describe('recurring schedule', () => {
  it('puts NFP on the first Friday of every month at 08:30 New York, across DST changes', () => {
    const seen: string[] = [];
    for (let w = weekStartOf(Date.UTC(2026, 0, 1)); w < Date.UTC(2027, 0, 1); w += 7 * 86_400_000) {
      for (const e of expandRules(DEFAULT_RULES, w)) {
        if (e.title !== 'Non-Farm Employment Change') continue;
        const d = new Date(e.time);
        expect(d.getUTCDay()).toBe(5);
        expect(d.getUTCDate()).toBeLessThanOrEqual(7);
        // 08:30 EST = 13:30 UTC, 08:30 EDT = 12:30 UTC
        const dst = d.getTime() >= Date.UTC(2026, 2, 8, 7) && d.getTime() < Date.UTC(2026, 10, 1, 6);
        expect(d.getUTCHours()).toBe(dst ? 12 : 13);
        expect(d.getUTCMinutes()).toBe(30);
        seen.push(e.time.slice(0, 7));
      }
    }
    expect(seen.filter((m) => m.startsWith('2026'))).toHaveLength(12);
  });

  it('has events in every week of several years (never empty)', () => {
    for (let w = weekStartOf(Date.UTC(2025, 0, 1)); w < Date.UTC(2028, 0, 1); w += 7 * 86_400_000) {
      const ev = expandRules(DEFAULT_RULES, w);
      expect(ev.length).toBeGreaterThan(2);
      for (const e of ev) expect(Date.parse(e.time) >= w && Date.parse(e.time) < w + 7 * 86_400_000).toBe(true);
    }
  });

  it('is deterministic: the same week gives the same figures', () => {
    expect(expandRules(DEFAULT_RULES, WEEK)).toEqual(expandRules(DEFAULT_RULES, WEEK));
  });
});

describe('importers', () => {
  it('reads a ForexFactory-style CSV in New York time, quoted fields, All Day rows', () => {
    const csv = [
      'Title,Country,Date,Time,Impact,Forecast,Previous',
      'Non-Farm Employment Change,USD,03-06-2026,8:30am,High,180K,143K',
      '"Bank Holiday, observed",JPY,03-03-2026,All Day,Holiday,,',
      'ECB Press Conference,EUR,03-05-2026,8:45am,High,,',
      'Broken,USD,13-45-2026,8:30am,High,,',
      'Weird impact,USD,03-06-2026,8:30am,Extreme,,',
    ].join('\r\n');
    const r = importCsv(csv);
    expect(r.events).toEqual([
      { title: 'Non-Farm Employment Change', country: 'USD', impact: 'High', time: '2026-03-06T13:30:00.000Z', forecast: '180K', previous: '143K' },
      { title: 'Bank Holiday, observed', country: 'JPY', impact: 'Holiday', time: '2026-03-03T05:00:00.000Z', forecast: '', previous: '' },
      { title: 'ECB Press Conference', country: 'EUR', impact: 'High', time: '2026-03-05T13:45:00.000Z', forecast: '', previous: '' },
    ]);
    expect(r.skipped).toHaveLength(2);
    expect(r.skipped[0]).toMatch(/line 5: bad date/);
    expect(r.skipped[1]).toMatch(/line 6: unknown impact/);
  });

  it('shifts a New York time in the spring-forward gap forward by the gap; a repeated time is the first one', () => {
    const csv = [
      'Title,Country,Date,Time,Impact,Forecast,Previous',
      'Before,USD,03-08-2026,1:30am,Low,,',
      'In the gap,USD,03-08-2026,2:30am,Low,,',
      'After,USD,03-08-2026,3:30am,Low,,',
      'Twice,USD,11-01-2026,1:30am,Low,,',
    ].join('\n');
    expect(importCsv(csv).events.map((e) => [e.title, e.time])).toEqual([
      ['Before', '2026-03-08T06:30:00.000Z'], // 01:30 EST
      ['In the gap', '2026-03-08T07:30:00.000Z'], // 02:30 does not exist: 03:30 EDT
      ['After', '2026-03-08T07:30:00.000Z'], // 03:30 EDT
      ['Twice', '2026-11-01T05:30:00.000Z'], // 01:30 EDT, the first of the two
    ]);
    // East of Greenwich too: Berlin 02:30 on 29 March 2026 is 03:30 CEST; 02:30 on 25 October is CEST.
    expect(new Date(zonedToUtc(2026, 3, 29, 2, 30, 'Europe/Berlin')).toISOString()).toBe('2026-03-29T01:30:00.000Z');
    expect(new Date(zonedToUtc(2026, 10, 25, 2, 30, 'Europe/Berlin')).toISOString()).toBe('2026-10-25T00:30:00.000Z');
  });

  it('reads an ICS export (UTC, TZID, folded lines, currency prefix, description fields)', () => {
    const ics = [
      'BEGIN:VCALENDAR', 'VERSION:2.0',
      'BEGIN:VEVENT', 'DTSTART:20260306T133000Z', 'SUMMARY:USD - Non-Farm Employment Change', 'X-IMPACT:High',
      'DESCRIPTION:Forecast: 180K\\nPrevious: 1', ' 43K', 'END:VEVENT',
      'BEGIN:VEVENT', 'DTSTART;TZID=Europe/London:20260305T120000', 'SUMMARY:Official Bank Rate ***', 'CATEGORIES:GBP', 'END:VEVENT',
      'BEGIN:VEVENT', 'SUMMARY:no start', 'END:VEVENT',
      'END:VCALENDAR',
    ].join('\r\n');
    const r = importIcs(ics);
    expect(r.events).toEqual([
      { title: 'Non-Farm Employment Change', country: 'USD', impact: 'High', time: '2026-03-06T13:30:00.000Z', forecast: '180K', previous: '143K' },
      { title: 'Official Bank Rate', country: 'GBP', impact: 'High', time: '2026-03-05T12:00:00.000Z', forecast: '', previous: '' },
    ]);
    expect(r.skipped).toEqual(['line 15 (event 3): no DTSTART']);
  });
});

// An Outlook-style export: Windows zone names as TZID, each defined in a VTIMEZONE block.
const OUTLOOK_ICS = [
  'BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:Microsoft Exchange Server 2010',
  'BEGIN:VTIMEZONE', 'TZID:Eastern Standard Time',
  'BEGIN:STANDARD', 'DTSTART:16010101T020000', 'TZOFFSETFROM:-0400', 'TZOFFSETTO:-0500', 'RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=1SU;BYMONTH=11', 'END:STANDARD',
  'BEGIN:DAYLIGHT', 'DTSTART:16010101T020000', 'TZOFFSETFROM:-0500', 'TZOFFSETTO:-0400', 'RRULE:FREQ=YEARLY;INTERVAL=1;BYDAY=2SU;BYMONTH=3', 'END:DAYLIGHT',
  'END:VTIMEZONE',
  'BEGIN:VEVENT', 'DTSTART;TZID=Eastern Standard Time:20260304T083000', 'SUMMARY:USD - CPI m/m', 'X-IMPACT:High', 'END:VEVENT', // line 19
  'BEGIN:VEVENT', 'DTSTART;TZID=Mars Standard Time:20260304T090000', 'SUMMARY:USD - Martian PMI', 'X-IMPACT:Low', 'END:VEVENT', // line 24
  'BEGIN:VEVENT', 'DTSTART;TZID=W. Europe Standard Time:20260305T074500', 'SUMMARY:EUR - German Factory Orders', 'X-IMPACT:Medium', 'END:VEVENT',
  'BEGIN:VEVENT', 'DTSTART;TZID=Tokyo Standard Time:20260305T085000', 'SUMMARY:JPY - Current Account', 'X-IMPACT:Low', 'END:VEVENT',
  'BEGIN:VEVENT', 'DTSTART;TZID=GMT Standard Time:20261120T070000', 'SUMMARY:GBP - Retail Sales m/m', 'X-IMPACT:High', 'END:VEVENT',
  'END:VCALENDAR',
].join('\r\n');

describe('one unreadable entry is skipped, not the whole file', () => {
  it('ICS: Windows zone names are read as their IANA zones; an unknown TZID skips that event with a reason', () => {
    const r = importIcs(OUTLOOK_ICS);
    expect(r.events.map((e) => [e.country, e.title, e.time])).toEqual([
      ['USD', 'CPI m/m', '2026-03-04T13:30:00.000Z'], // 08:30 EST
      ['EUR', 'German Factory Orders', '2026-03-05T06:45:00.000Z'], // 07:45 CET
      ['JPY', 'Current Account', '2026-03-04T23:50:00.000Z'], // 08:50 JST
      ['GBP', 'Retail Sales m/m', '2026-11-20T07:00:00.000Z'], // 07:00 GMT
    ]);
    expect(r.skipped).toEqual(["line 24 (event 2): unknown TZID 'Mars Standard Time'"]);
  });

  it('ICS: a TZID defined by a fixed-offset VTIMEZONE or by X-LIC-LOCATION is honoured; a DST one with an unknown name is skipped', () => {
    const ics = [
      'BEGIN:VCALENDAR',
      'BEGIN:VEVENT', 'DTSTART;TZID="(UTC+05:30) Chennai, Kolkata":20260305T100000', 'SUMMARY:INR - Trade Balance', 'END:VEVENT',
      'BEGIN:VEVENT', 'DTSTART;TZID=Custom NZ:20260305T104500', 'SUMMARY:NZD - ANZ Commodity Prices', 'END:VEVENT',
      'BEGIN:VEVENT', 'DTSTART;TZID=Custom DST:20260305T104500', 'SUMMARY:USD - Nowhere', 'END:VEVENT',
      'BEGIN:VTIMEZONE', 'TZID:(UTC+05:30) Chennai, Kolkata',
      'BEGIN:STANDARD', 'TZOFFSETFROM:+0530', 'TZOFFSETTO:+0530', 'END:STANDARD', 'BEGIN:DAYLIGHT', 'TZOFFSETFROM:+0530', 'TZOFFSETTO:+0530', 'END:DAYLIGHT',
      'END:VTIMEZONE',
      'BEGIN:VTIMEZONE', 'TZID:Custom NZ', 'X-LIC-LOCATION:Pacific/Auckland',
      'BEGIN:STANDARD', 'TZOFFSETTO:+1200', 'END:STANDARD', 'BEGIN:DAYLIGHT', 'TZOFFSETTO:+1300', 'END:DAYLIGHT',
      'END:VTIMEZONE',
      'BEGIN:VTIMEZONE', 'TZID:Custom DST',
      'BEGIN:STANDARD', 'TZOFFSETTO:-0500', 'END:STANDARD', 'BEGIN:DAYLIGHT', 'TZOFFSETTO:-0400', 'END:DAYLIGHT',
      'END:VTIMEZONE',
      'END:VCALENDAR',
    ].join('\n');
    const r = importIcs(ics);
    expect(r.events.map((e) => [e.country, e.time])).toEqual([
      ['INR', '2026-03-05T04:30:00.000Z'],
      ['NZD', '2026-03-04T21:45:00.000Z'], // 10:45 NZDT
    ]);
    expect(r.skipped).toEqual([expect.stringMatching(/^line 10 \(event 3\): unknown TZID 'Custom DST' \(its VTIMEZONE has daylight-saving rules/)]);
  });

  it('JSON events: an event with a bad impact or time is skipped with its number; the others are kept', () => {
    const r = importJsonEvents({
      events: [
        { title: 'CPI m/m', country: 'usd', impact: 'High', time: '2026-03-04T08:30:00-05:00', forecast: '0.3%' },
        { title: 'Bad impact', country: 'USD', impact: 'Extreme', time: '2026-03-04T13:30:00Z' },
        { title: 'Bad time', country: 'USD', impact: 'Low', time: '2026-03-04 13:30' },
        { title: 'GDP q/q', country: 'EUR', impact: 'Medium', time: '2026-03-05T10:00:00Z' },
      ],
    });
    expect(r.events).toEqual([
      { title: 'CPI m/m', country: 'USD', impact: 'High', time: '2026-03-04T13:30:00.000Z', forecast: '0.3%', previous: '' },
      { title: 'GDP q/q', country: 'EUR', impact: 'Medium', time: '2026-03-05T10:00:00.000Z', forecast: '', previous: '' },
    ]);
    expect(r.skipped).toEqual([
      expect.stringMatching(/^event 2 'Bad impact': impact: /),
      expect.stringMatching(/^event 3 'Bad time': time: ISO 8601 instant with a zone/),
    ]);
    // The file's own shape is still checked as a whole.
    expect(() => importJsonEvents({ events: {} })).toThrow();
  });

  it('the import CLI skips and reports such entries; a failure is one line, never a stack trace', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-news-'));
    const cli = (...args: string[]) => spawnSync(process.execPath, [...builtCli(), 'calendar', ...args], { encoding: 'utf8', timeout: 30_000 });
    try {
      writeFileSync(join(dir, 'outlook.ics'), OUTLOOK_ICS);
      const ok = cli('import', join(dir, 'outlook.ics'));
      expect(ok.status).toBe(0);
      expect(ok.stderr).toBe("skipped line 24 (event 2): unknown TZID 'Mars Standard Time'\n4 events imported\n");
      expect((JSON.parse(ok.stdout) as { events: unknown[] }).events).toHaveLength(4);

      const missing = cli('import', join(dir, 'missing.ics'));
      expect(missing.status).toBe(1);
      expect(missing.stderr).toMatch(/^tagw: ENOENT[^\n]*\n$/);
      const badTz = cli('import', join(dir, 'outlook.ics'), '--tz', 'Mars/Base');
      expect(badTz.status).toBe(1);
      expect(badTz.stderr).toBe("tagw: --tz: unknown time zone 'Mars/Base' (an IANA name such as America/New_York or UTC)\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('calendarTimeZone config', () => {
  it('refuses an unknown zone when the config is parsed', () => {
    expect(() => loadConfig({ CALENDAR_TIME_ZONE: 'Mars/Base' })).toThrow(ConfigError);
    expect(() => loadConfig({ CALENDAR_TIME_ZONE: 'Mars/Base' })).toThrow(/calendarTimeZone: unknown time zone 'Mars\/Base'/);
    expect(loadConfig({ CALENDAR_TIME_ZONE: 'Europe/London' }).calendarTimeZone).toBe('Europe/London');
    expect(loadConfig({}).calendarTimeZone).toBe('America/New_York');
  });

  it('the gateway process exits 2 with the config error, like other config errors', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-news-'));
    try {
      const r = spawnSync(process.execPath, [builtEntry('src/main.ts')], {
        env: { PATH: process.env.PATH, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, SHARDS: '1', CALENDAR_TIME_ZONE: 'Mars/Base' },
        encoding: 'utf8', timeout: 30_000,
      });
      expect(r.status).toBe(2);
      expect(r.stderr).toContain("calendarTimeZone: unknown time zone 'Mars/Base'");
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('GET /news over HTTP', () => {
  let t: TestGateway;
  let key: string;
  const dir = mkdtempSync(join(tmpdir(), 'tagw-news-'));

  beforeAll(async () => {
    t = await startTestGateway({ calendarFile: join(dir, 'missing.json') }, { clock: new ManualClock(NOW), log: createLogger('warn', {}, (l) => logLines.push(l)) });
    key = await apiKey(t);
  });
  const logLines: string[] = [];
  afterAll(async () => {
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('needs a valid API key (x-api-key or Bearer) or the management key (Bearer or x-management-key): a connection route, SPEC §5.2/§5.8', async () => {
    expect((await t.req('GET', '/news')).status).toBe(401);
    expect((await t.req('GET', '/news', { headers: { 'x-api-key': 'tagw_nope' } })).status).toBe(401);
    expect((await t.req('GET', '/news', { headers: mgmt(t.managementKey) })).status).toBe(200);
    expect((await t.req('GET', '/news', { headers: { 'x-management-key': t.managementKey } })).status).toBe(200);
    expect((await t.req('GET', '/news', { headers: { 'x-api-key': key } })).status).toBe(200);
    expect((await t.req('GET', '/news', { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
  });

  it("serves this week's events from the built-in schedule when there is no file", async () => {
    const r = await t.req('GET', '/news', { headers: { 'x-api-key': key } });
    expect(r.headers.get('x-calendar-source')).toBe('default-rules');
    // And says so once in the log: a misspelt CALENDAR_FILE (or a start from another directory than
    // the repository's, the default being ./config/calendar.json) served the built-in schedule in silence.
    await t.req('GET', '/news', { headers: { 'x-api-key': key } });
    const said = logLines.filter((l) => l.includes('calendar file not found'));
    expect(said.length, logLines.join('\n')).toBe(1);
    expect(JSON.parse(said[0]!)).toMatchObject({ level: 'warn', file: join(dir, 'missing.json') });
    const events = r.body as Array<Record<string, string>>;
    expect(events.length).toBeGreaterThan(5);
    for (const e of events) {
      expect(Object.keys(e).sort()).toEqual(['country', 'forecast', 'impact', 'previous', 'time', 'title']);
      expect(Date.parse(e.time!)).toBeGreaterThanOrEqual(WEEK);
      expect(Date.parse(e.time!)).toBeLessThan(WEEK + 7 * 86_400_000);
    }
    expect(events.map((e) => e.time)).toEqual([...events.map((e) => e.time)].sort());
    expect(events).toContainEqual(expect.objectContaining({ title: 'Non-Farm Employment Change', country: 'USD', impact: 'High', time: '2026-03-06T13:30:00.000Z' }));
  });

  it('filters by country and impact, repeated or comma-separated, case-insensitive', async () => {
    const all = (await t.req('GET', '/news', { headers: { 'x-api-key': key } })).body as Array<Record<string, string>>;
    const r1 = await t.req('GET', '/news?country=usd&impact=High,medium', { headers: { 'x-api-key': key } });
    expect(r1.status).toBe(200);
    expect(r1.body).toEqual(all.filter((e) => e.country === 'USD' && (e.impact === 'High' || e.impact === 'Medium')));
    expect(r1.body.length).toBeGreaterThan(0);
    const r2 = await t.req('GET', '/news?country=EUR&country=USD', { headers: { 'x-api-key': key } });
    expect(r2.body).toEqual(all.filter((e) => e.country === 'USD' || e.country === 'EUR'));
    const r3 = await t.req('GET', '/news?country=XYZ', { headers: { 'x-api-key': key } });
    expect(r3.body).toEqual([]);
  });

  it('answers 400 for bad filter values', async () => {
    const r = await t.req('GET', '/news?impact=Extreme', { headers: { 'x-api-key': key } });
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('BAD_REQUEST');
    // The parameter as the client wrote it, with the bad value's place in its list: not 'impact.0'.
    expect(r.body.message).toMatch(/^parameter 'impact' \(value 1\): /);
    const second = await t.req('GET', '/news?impact=High,Extreme', { headers: { 'x-api-key': key } });
    expect(second.body.message).toMatch(/^parameter 'impact' \(value 2\): /);
    expect((await t.req('GET', '/news?country=U$D', { headers: { 'x-api-key': key } })).status).toBe(400);
  });

  it('answers 400 for an impact that is not one of the four names (no stars, numbers or prefixes)', async () => {
    for (const q of ['impact=highest', 'impact=lowercase', 'impact=3', 'impact=***', 'impact=med', 'impact=non-economic', 'impact=High,lowish']) {
      const r = await t.req('GET', `/news?${q}`, { headers: { 'x-api-key': key } });
      expect(r.status, q).toBe(400);
      expect(r.body.error).toBe('BAD_REQUEST');
      expect(r.body.message, q).toMatch(/one of High, Medium, Low, Holiday/);
    }
    expect((await t.req('GET', '/news?impact=HOLIDAY,low', { headers: { 'x-api-key': key } })).status).toBe(200);
  });

  it('answers 400 for a country that is not a three-letter currency code (US, USDX)', async () => {
    for (const q of ['country=US', 'country=USDX', 'country=EUR,US', 'country=usdx&impact=High']) {
      const r = await t.req('GET', `/news?${q}`, { headers: { 'x-api-key': key } });
      expect(r.status, q).toBe(400);
      expect(r.body.error).toBe('BAD_REQUEST');
      expect(r.body.message).toMatch(/country.*three-letter currency code/);
    }
  });

  it('answers 400 for an empty filter (country= or impact=), which would otherwise answer the whole week', async () => {
    for (const q of ['country=', 'impact=', 'country=,', 'impact=&country=USD']) {
      const r = await t.req('GET', `/news?${q}`, { headers: { 'x-api-key': key } });
      expect(r.status, q).toBe(400);
      expect(r.body.message, q).toContain('empty filter');
    }
  });

  it('answers 400 for a query parameter other than country and impact, instead of ignoring it', async () => {
    for (const q of ['currency=USD', 'from=2026-03-01', 'countries=USD', 'country=USD&from=']) {
      const r = await t.req('GET', `/news?${q}`, { headers: { 'x-api-key': key } });
      expect(r.status, q).toBe(400);
      expect(r.body.error).toBe('INVALID_PARAMETER');
      expect(r.body.message).toMatch(/unknown parameter '(currency|from|countries)'/);
    }
  });

  it('documents the rule in the OpenAPI description', async () => {
    const spec = (await t.req('GET', '/openapi.json')).body as { paths: Record<string, { get: { description: string } }> };
    expect(spec.paths['/news']!.get.description).toMatch(/any other parameter .* is a 400/);
  });
});

describe('GET /news from an operator file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-news-'));
  const file = join(dir, 'calendar.csv');
  let t: TestGateway;
  let key: string;
  beforeAll(async () => {
    writeFileSync(file, 'Title,Country,Date,Time,Impact,Forecast,Previous\nCPI m/m,USD,03-04-2026,8:30am,High,0.3%,0.2%\nGDP q/q,EUR,03-05-2026,5:00am,Medium,,\nOld,USD,01-05-2026,8:30am,Low,,\n');
    t = await startTestGateway({ calendarFile: file }, { clock: new ManualClock(NOW) });
    key = await apiKey(t);
  });
  afterAll(async () => {
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the imported CSV events of this week only', async () => {
    const r = await t.req('GET', '/news', { headers: { 'x-api-key': key } });
    expect(r.headers.get('x-calendar-source')).toBe('file');
    expect(r.body).toEqual([
      { title: 'CPI m/m', country: 'USD', impact: 'High', time: '2026-03-04T13:30:00.000Z', forecast: '0.3%', previous: '0.2%' },
      { title: 'GDP q/q', country: 'EUR', impact: 'Medium', time: '2026-03-05T10:00:00.000Z', forecast: '', previous: '' },
    ]);
  });

  it('picks up a replaced file without a restart, and falls back to the schedule when the file has nothing this week', async () => {
    writeFileSync(file, 'Title,Country,Date,Time,Impact,Forecast,Previous\nOld,USD,01-05-2025,8:30am,Low,,\n');
    const { utimesSync } = await import('node:fs');
    utimesSync(file, new Date(), new Date(Date.now() + 5_000));
    const r = await t.req('GET', '/news', { headers: { 'x-api-key': key } });
    expect(r.headers.get('x-calendar-source')).toBe('default-rules');
    expect(r.body.length).toBeGreaterThan(5);
  });
});

describe('GET /news from an ICS or JSON file with one bad entry', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-news-'));
  const gateways: TestGateway[] = [];
  afterAll(async () => {
    for (const g of gateways) await g.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  async function newsFrom(name: string, content: string) {
    writeFileSync(join(dir, name), content);
    const g = await startTestGateway({ calendarFile: join(dir, name) }, { clock: new ManualClock(NOW) });
    gateways.push(g);
    return g.req('GET', '/news', { headers: { 'x-api-key': await apiKey(g) } });
  }

  it('serves the readable events of an Outlook ICS export whose one event has an unknown TZID', async () => {
    const r = await newsFrom('outlook.ics', OUTLOOK_ICS);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-calendar-source')).toBe('file');
    expect((r.body as Array<Record<string, string>>).map((e) => [e.country, e.title, e.time])).toEqual([
      ['USD', 'CPI m/m', '2026-03-04T13:30:00.000Z'],
      ['JPY', 'Current Account', '2026-03-04T23:50:00.000Z'],
      ['EUR', 'German Factory Orders', '2026-03-05T06:45:00.000Z'],
    ]);
  });

  it('a rules file with an unknown zone is unreadable (built-in schedule), not a 500 on every request', async () => {
    const rules = DEFAULT_RULES.map((r) => ({ ...r, tz: 'Mars/Base' }));
    const r = await newsFrom('rules.json', JSON.stringify({ rules }));
    expect(r.status).toBe(200);
    expect(r.headers.get('x-calendar-source')).toBe('default-rules');
    expect(r.body).toEqual(expandRules(DEFAULT_RULES, WEEK).sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : a.country.localeCompare(b.country))));
  });

  it('serves the readable events of a JSON events file whose one event has a bad impact', async () => {
    const r = await newsFrom('events.json', JSON.stringify({
      events: [
        { title: 'CPI m/m', country: 'USD', impact: 'High', time: '2026-03-04T13:30:00Z', forecast: '0.3%', previous: '0.2%' },
        { title: 'Broken', country: 'USD', impact: 'Extreme', time: '2026-03-04T14:00:00Z' },
      ],
    }));
    expect(r.headers.get('x-calendar-source')).toBe('file');
    expect(r.body).toEqual([{ title: 'CPI m/m', country: 'USD', impact: 'High', time: '2026-03-04T13:30:00.000Z', forecast: '0.3%', previous: '0.2%' }]);
  });
});
