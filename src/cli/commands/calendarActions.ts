// What tagw calendar import|rules|week do (calendar.ts declares them): loaded only when one of them
// runs, with the calendar modules (src/news/) they need.
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

export function importFile(file: string, tzArg: string | undefined): void {
  const tz = zone(tzArg);
  const r = importing(() => loadCalendarFile(file, tz));
  for (const s of r.skipped) process.stderr.write(`skipped ${s}\n`);
  process.stderr.write(`${r.events?.length ?? 0} events imported\n`);
  json(r.rules ? { rules: r.rules } : { events: r.events ?? [] });
}

export function rules(): void {
  json({ rules: DEFAULT_RULES });
}

export function week(file: string | undefined, tzArg: string | undefined): void {
  const tz = zone(tzArg);
  json(importing(() => new Calendar(file, tz, createLogger('warn')).week(Date.now())));
}
