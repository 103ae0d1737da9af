// GET /news (SPEC §4.2): this week's economic calendar, any valid API key as x-api-key or Bearer.
import { z } from 'zod';
import { Calendar } from '../../news/calendar.js';
import { IMPACTS, type Impact } from '../../news/types.js';
import type { Services } from '../services.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { qList } from '../schemas.js';

// SPEC §4.2 names two query parameters, country and impact. Anything else (currency=, from=, a
// misspelt countries=) is a 400 rather than silently ignored: ignoring it answers the unfiltered
// week as if it had been applied. A country is a three-letter currency code as exports write it
// (docs/news.md); anything else (US, USDX) is malformed, not an unknown code, so also a 400.
export const NewsQuery = z.strictObject({
  country: qList().pipe(z.array(z.string().regex(/^[A-Za-z]{3}$/, 'a three-letter currency code such as USD')).min(1, 'an empty filter would answer the whole week')).optional()
    .describe('Currency codes, three letters (USD, EUR, ...); repeat or comma-separate; case-insensitive. Default: all'),
  // Only the four names, in any case. parseImpact is the importers' lenient reader (stars, 1-3,
  // any word starting with high/low...): on a filter it would turn a typo (impact=highest,
  // impact=lowercase) into a filter the caller did not ask for instead of a 400.
  impact: qList().pipe(z.array(z.string().transform((s, c) => {
    const v = IMPACTS.find((i) => i.toLowerCase() === s.trim().toLowerCase());
    if (!v) c.addIssue({ code: 'custom', message: `one of ${IMPACTS.join(', ')}` });
    return v as Impact;
  })).min(1, 'an empty filter would answer the whole week')).optional().describe(`Impact levels (${IMPACTS.join(', ')}), case-insensitive; repeat or comma-separate. Default: all`),
}, {
  error: (iss) => (iss.code === 'unrecognized_keys'
    ? `unknown parameter${iss.keys.length > 1 ? 's' : ''} ${iss.keys.map((k) => `'${k}'`).join(', ')}: /news takes only country and impact`
    : undefined),
});

export const CalendarEventSchema = z.object({
  title: z.string(),
  country: z.string().describe('Currency code'),
  impact: z.enum(IMPACTS),
  time: z.string().describe('ISO 8601, UTC'),
  forecast: z.string().describe('Empty when unknown'),
  previous: z.string().describe('Empty when unknown'),
}).meta({ id: 'CalendarEvent' });

export function newsRoutes(s: Services): AnyRoute[] {
  const calendar = new Calendar(s.config.calendarFile, s.config.calendarTimeZone, s.log);
  return [
    defineRoute({
      method: 'get', path: '/news', family: 'news', auth: 'news', tags: ['news'],
      summary: "This week's economic calendar events",
      description: 'Events of the week (Sunday 00:00 UTC to the next Sunday) sorted by time. Header x-calendar-source tells where they came from: file, rules or default-rules. Query parameters are country and impact only: any other parameter (currency, from...) is a 400, as is a country that is not a three-letter code or an impact outside the four.',
      query: NewsQuery, response: z.array(CalendarEventSchema), errors: ['BAD_REQUEST', 'INVALID_PARAMETER', 'API_KEY_REQUIRED', 'INVALID_API_KEY'],
      handler: ({ query }) => {
        const filter: { countries?: string[]; impacts?: Impact[] } = {};
        if (query.country) filter.countries = query.country;
        if (query.impact) filter.impacts = query.impact;
        const w = calendar.week(s.clock.now(), filter);
        return { body: w.events, headers: { 'x-calendar-source': w.source, 'cache-control': 'private, max-age=60' } };
      },
    }),
  ];
}
