// tagw calendar import|rules|week: the economic calendar tool (docs/news.md), no network. Wall-clock
// times without a zone (CSV, floating ICS) are read in the zone the gateway reads them in
// (CALENDAR_TIME_ZONE, default America/New_York), so a converted file holds the events that serving
// the export directly gives. What they do is in calendarActions.ts, loaded when one runs.
import type { Command } from 'commander';

const actions = () => import('./calendarActions.js');

export function calendarCommand(program: Command): void {
  const cal = program.command('calendar').description('the /news economic calendar (writes JSON to stdout)');
  cal.command('import <file>').description('convert a CSV or ICS export: tagw calendar import export.csv > config/calendar.json')
    .option('--tz <zone>', 'zone of times without one (default CALENDAR_TIME_ZONE, else America/New_York)')
    .action(async (file: string, o: { tz?: string }) => (await actions()).importFile(file, o.tz));
  cal.command('rules').description('the built-in recurring schedule').action(async () => (await actions()).rules());
  cal.command('week [file]').description('what /news would serve this week from a calendar file')
    .option('--tz <zone>', 'zone of times without one')
    .action(async (file: string | undefined, o: { tz?: string }) => (await actions()).week(file, o.tz));
}
