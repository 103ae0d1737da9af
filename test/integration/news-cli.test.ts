// The import CLI (tagw calendar) and the gateway read wall-clock times without a zone (CSV, floating ICS) in the
// same zone (docs/news.md: calendarTimeZone, env CALENDAR_TIME_ZONE, default America/New_York), so
// converting an export once gives the events that serving the export directly gives.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { weekStartOf } from '../../src/news/calendar.js';
import { builtCli } from '../helpers/build.js';

/** This run's built CLI (cli.test.ts runs the bin/tagw.js launcher itself). */
const CLI = builtCli();

const dir = mkdtempSync(join(tmpdir(), 'tagw-news-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A floating DTSTART (no Z, no TZID) in the middle of the current week, so `week` serves it.
const mid = new Date(weekStartOf(Date.now()) + 3 * 86_400_000);
const stamp = `${mid.toISOString().slice(0, 10).replace(/-/g, '')}T083000`;
const ICS = ['BEGIN:VCALENDAR', 'BEGIN:VEVENT', `DTSTART:${stamp}`, 'SUMMARY:USD - Non-Farm Employment Change ***', 'END:VEVENT', 'END:VCALENDAR', ''].join('\r\n');

function cli(args: string[], env: Record<string, string> = {}) {
  const e: NodeJS.ProcessEnv = { ...process.env, ...env };
  if (!('CALENDAR_TIME_ZONE' in env)) delete e.CALENDAR_TIME_ZONE;
  return spawnSync(process.execPath, [...CLI, 'calendar', ...args], { encoding: 'utf8', timeout: 30_000, env: e });
}
const importedTime = (r: ReturnType<typeof cli>) => (JSON.parse(r.stdout) as { events: Array<{ time: string }> }).events[0]!.time;
const servedTime = (r: ReturnType<typeof cli>) => (JSON.parse(r.stdout) as { events: Array<{ time: string }> }).events[0]!.time;

let file: string;
beforeAll(() => {
  file = join(dir, 'floating.ics');
  writeFileSync(file, ICS);
});

it('import reads a floating ICS time in the gateway default zone (New York), as week and the gateway do', () => {
  const imported = cli(['import', file]);
  expect(imported.status, imported.stderr).toBe(0);
  const week = cli(['week', file]);
  expect(week.status, week.stderr).toBe(0);
  expect(importedTime(imported)).toBe(servedTime(week));
  // 08:30 New York is 12:30 or 13:30 UTC depending on DST, never 08:30 UTC.
  expect(importedTime(imported)).toMatch(/T1[23]:30:00\.000Z$/);
}, 60_000);

it('both honour CALENDAR_TIME_ZONE, and --tz wins over it', () => {
  const env = { CALENDAR_TIME_ZONE: 'UTC' };
  expect(importedTime(cli(['import', file], env))).toMatch(/T08:30:00\.000Z$/);
  expect(servedTime(cli(['week', file], env))).toMatch(/T08:30:00\.000Z$/);
  expect(importedTime(cli(['import', file, '--tz', 'Asia/Tokyo'], env))).toMatch(/T23:30:00\.000Z$/);
  const bad = cli(['import', file], { CALENDAR_TIME_ZONE: 'Mars/Base' });
  expect(bad.status).toBe(1);
  expect(bad.stderr).toBe("tagw: CALENDAR_TIME_ZONE: unknown time zone 'Mars/Base' (an IANA name such as America/New_York or UTC)\n");
}, 60_000);
