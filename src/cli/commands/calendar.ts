// tagw calendar import|rules|week: the economic calendar tool (docs/news.md), no network. Wall-clock
// times without a zone (CSV, floating ICS) are read in the zone the gateway reads them in
// (CALENDAR_TIME_ZONE, default America/New_York), so a converted file holds the events that serving
// the export directly gives.
import type { Command } from 'commander';
import { Calendar, loadCalendarFile } from '../../news/calendar.js';
import { DEFAULT_RULES } from '../../news/defaultRules.js';
import { describeImportError } from '../../news/importers.js';
import { isTimeZone } from '../../news/zone.js';
import { createLogger } from '../../log.js';
import { CliError, EXIT } from '../errors.js';

function zone(tzArg: string | undefined): string {
  const tz = tzArg ?? process.env.CALENDAR_TIME_ZONE ?? 'America/New_York';
  if (!isTimeZone(tz)) throw new CliError(EXIT.FAILED, `${tzArg !== undefined ? '--tz' : 'CALENDAR_TIME_ZONE'}: unknown time zone '${tz}' (an IANA name such as America/New_York or UTC)`);
  return tz;
}

/** Import errors (a bad row, an unreadable file) are the operator's to fix: one line. */
function importing<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof CliError) throw e;
    throw new CliError(EXIT.FAILED, describeImportError(e));
  }
}

const json = (v: unknown) => process.stdout.write(`${JSON.stringify(v, null, 1)}\n`);

export function calendarCommand(program: Command): void {
  const cal = program.command('calendar').description('the /news economic calendar (writes JSON to stdout)');
  cal.command('import <file>').description('convert a CSV or ICS export: tagw calendar import export.csv > config/calendar.json')
    .option('--tz <zone>', 'zone of times without one (default CALENDAR_TIME_ZONE, else America/New_York)')
    .action((file: string, o: { tz?: string }) => {
      const tz = zone(o.tz);
      const r = importing(() => loadCalendarFile(file, tz));
      for (const s of r.skipped) process.stderr.write(`skipped ${s}\n`);
      process.stderr.write(`${r.events?.length ?? 0} events imported\n`);
      json(r.rules ? { rules: r.rules } : { events: r.events ?? [] });
    });
  cal.command('rules').description('the built-in recurring schedule').action(() => {
    json({ rules: DEFAULT_RULES });
  });
  cal.command('week [file]').description('what /news would serve this week from a calendar file')
    .option('--tz <zone>', 'zone of times without one')
    .action((file: string | undefined, o: { tz?: string }) => {
      const tz = zone(o.tz);
      json(importing(() => new Calendar(file, tz, createLogger('warn')).week(Date.now())));
    });
}
