import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { DEFAULT_RULES } from '../src/news/defaultRules.js';
import { importCsv, importIcs } from '../src/news/importers.js';
import { expandRules } from '../src/news/schedule.js';
import { weekStartOf } from '../src/news/calendar.js';
import { zonedToUtc } from '../src/news/zone.js';
import { ManualClock, mgmt, startTestGateway, type TestGateway } from './helpers/gateway.js';

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
    expect(r.skipped).toEqual(['event 3: no DTSTART']);
  });
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
      const r = spawnSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, '..', 'src', 'main.ts')], {
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
    t = await startTestGateway({ calendarFile: join(dir, 'missing.json') }, { clock: new ManualClock(NOW) });
    key = await apiKey(t);
  });
  afterAll(async () => {
    await t.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('needs a valid API key, as x-api-key or Bearer; a management key is not one', async () => {
    expect((await t.req('GET', '/news')).status).toBe(401);
    expect((await t.req('GET', '/news', { headers: { 'x-api-key': 'tagw_nope' } })).status).toBe(401);
    expect((await t.req('GET', '/news', { headers: mgmt(t.managementKey) })).status).toBe(401);
    expect((await t.req('GET', '/news', { headers: { 'x-api-key': key } })).status).toBe(200);
    expect((await t.req('GET', '/news', { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
  });

  it("serves this week's events from the built-in schedule when there is no file", async () => {
    const r = await t.req('GET', '/news', { headers: { 'x-api-key': key } });
    expect(r.headers.get('x-calendar-source')).toBe('default-rules');
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
    expect((await t.req('GET', '/news?country=U$D', { headers: { 'x-api-key': key } })).status).toBe(400);
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
