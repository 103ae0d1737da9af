// GET /news (SPEC §4.2): this week's economic calendar, any valid API key as x-api-key or Bearer.
import { z } from 'zod';
import { Calendar } from '../../news/calendar.js';
import { IMPACTS, parseImpact, type Impact } from '../../news/types.js';
import type { Services } from '../../services.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { qList } from '../schemas.js';

export const NewsQuery = z.object({
  country: qList().pipe(z.array(z.string().regex(/^[A-Za-z]{2,4}$/, 'a currency code such as USD'))).optional()
    .describe('Currency codes (USD, EUR, ...); repeat or comma-separate. Default: all'),
  impact: qList().pipe(z.array(z.string().transform((s, c) => {
    const v = parseImpact(s);
    if (!v) c.addIssue({ code: 'custom', message: `one of ${IMPACTS.join(', ')}` });
    return v as Impact;
  }))).optional().describe(`Impact levels (${IMPACTS.join(', ')}); repeat or comma-separate. Default: all`),
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
      description: 'Events of the week (Sunday 00:00 UTC to the next Sunday) sorted by time. Header x-calendar-source tells where they came from: file, rules or default-rules.',
      query: NewsQuery, response: z.array(CalendarEventSchema), errors: ['BAD_REQUEST', 'API_KEY_REQUIRED', 'INVALID_API_KEY'],
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
