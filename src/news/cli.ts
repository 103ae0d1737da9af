// Calendar import tool (no network):
//   node --import tsx src/news/cli.ts import <export.csv|export.ics> [--tz Zone] > config/calendar.json
//   (times without a zone: --tz, else CALENDAR_TIME_ZONE, else America/New_York, as the gateway reads them)
//   node --import tsx src/news/cli.ts rules > config/calendar.json      (the built-in recurring schedule)
//   node --import tsx src/news/cli.ts week [file]                        (what /news would serve this week)
// The gateway also reads .csv/.ics directly; converting once gives a file that is checked up front.
import { DEFAULT_RULES } from './defaultRules.js';
import { Calendar } from './calendar.js';
import { loadCalendarFile } from './calendar.js';
import { describeImportError } from './importers.js';
import { isTimeZone } from './zone.js';
import { createLogger } from '../log.js';

class UsageError extends Error {}

function main(argv: string[]): number {
  const [cmd, file] = argv;
  const tzAt = argv.indexOf('--tz');
  const tzArg = tzAt >= 0 ? argv[tzAt + 1] : undefined;
  if (tzAt >= 0 && !tzArg) throw new UsageError('--tz needs a zone name');
  // Wall-clock times without a zone (CSV, floating ICS) are read in the zone the gateway reads them
  // in (calendarTimeZone: env CALENDAR_TIME_ZONE, default New York), for import and week alike, so
  // a converted file holds the events that serving the export directly gives.
  const tz = tzArg ?? process.env.CALENDAR_TIME_ZONE ?? 'America/New_York';
  if (!isTimeZone(tz)) throw new Error(`${tzArg !== undefined ? '--tz' : 'CALENDAR_TIME_ZONE'}: unknown time zone '${tz}' (an IANA name such as America/New_York or UTC)`);
  if (cmd === 'rules') {
    process.stdout.write(`${JSON.stringify({ rules: DEFAULT_RULES }, null, 1)}\n`);
    return 0;
  }
  if (cmd === 'import' && file) {
    const r = loadCalendarFile(file, tz);
    for (const s of r.skipped) process.stderr.write(`skipped ${s}\n`);
    process.stderr.write(`${r.events?.length ?? 0} events imported\n`);
    process.stdout.write(`${JSON.stringify(r.rules ? { rules: r.rules } : { events: r.events ?? [] }, null, 1)}\n`);
    return 0;
  }
  if (cmd === 'week') {
    const cal = new Calendar(file, tz, createLogger('warn'));
    const w = cal.week(Date.now());
    process.stdout.write(`${JSON.stringify(w, null, 1)}\n`);
    return 0;
  }
  throw new UsageError('');
}

// Errors are one line on stderr (exit 1; usage errors exit 2), never a stack trace: the tool is
// for operators converting an export, not for debugging it.
try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  if (e instanceof UsageError) {
    if (e.message) process.stderr.write(`cli.ts: ${e.message}\n`);
    process.stderr.write('usage: cli.ts import <file.csv|file.ics> [--tz Zone] | rules | week [file]\n');
    process.exitCode = 2;
  } else {
    process.stderr.write(`cli.ts: ${describeImportError(e)}\n`);
    process.exitCode = 1;
  }
}
