// The built-in recurring schedule: the releases FX traders watch, at their usual local times and
// on the usual pattern of days (central-bank meeting months approximate the published calendars;
// exact dates move by a week from year to year). Forecast/previous figures are plausible and
// deterministic, not real data: for real figures, import an export (docs/news.md).
// config/calendar.json ships the same rules as data (`npm run calendar -- rules` writes them).
import type { Rule } from './schedule.js';

const NY = 'America/New_York';
const FRA = 'Europe/Berlin';
const LON = 'Europe/London';
const TYO = 'Asia/Tokyo';
const SYD = 'Australia/Sydney';
const ZRH = 'Europe/Zurich';
const WLG = 'Pacific/Auckland';

const nfpDay = { every: 'month', nth: 1, weekday: 'Fri' } as const;
const pct = (center: number, spread: number, decimals = 1) => ({ center, spread, decimals, unit: '%' });

export const DEFAULT_RULES: Rule[] = [
  // United States
  { title: 'Non-Farm Employment Change', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: nfpDay, values: { center: 170, spread: 80, decimals: 0, unit: 'K' } },
  { title: 'Unemployment Rate', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: nfpDay, values: pct(4.1, 0.2) },
  { title: 'Average Hourly Earnings m/m', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: nfpDay, values: pct(0.3, 0.1) },
  { title: 'CPI m/m', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: { every: 'month', nth: 2, weekday: 'Wed' }, values: pct(0.2, 0.2) },
  { title: 'Core CPI m/m', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: { every: 'month', nth: 2, weekday: 'Wed' }, values: pct(0.3, 0.1) },
  { title: 'Core PPI m/m', country: 'USD', impact: 'Medium', time: '08:30', tz: NY, when: { every: 'month', nth: 2, weekday: 'Thu' }, values: pct(0.2, 0.2) },
  { title: 'Retail Sales m/m', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: { every: 'monthDay', day: 15 }, values: pct(0.3, 0.5) },
  { title: 'ISM Manufacturing PMI', country: 'USD', impact: 'High', time: '10:00', tz: NY, when: { every: 'businessDay', nth: 1 }, values: { center: 49.5, spread: 2, decimals: 1, unit: '' } },
  { title: 'ISM Services PMI', country: 'USD', impact: 'High', time: '10:00', tz: NY, when: { every: 'businessDay', nth: 3 }, values: { center: 52.5, spread: 2, decimals: 1, unit: '' } },
  { title: 'Unemployment Claims', country: 'USD', impact: 'Medium', time: '08:30', tz: NY, when: { every: 'week', weekdays: ['Thu'] }, values: { center: 225, spread: 15, decimals: 0, unit: 'K' } },
  { title: 'Crude Oil Inventories', country: 'USD', impact: 'Low', time: '10:30', tz: NY, when: { every: 'week', weekdays: ['Wed'] }, values: { center: -1, spread: 4, decimals: 1, unit: 'M' } },
  { title: 'Prelim GDP q/q', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: { every: 'month', nth: -1, weekday: 'Thu', months: [1, 4, 7, 10] }, values: pct(2.2, 1) },
  { title: 'Core PCE Price Index m/m', country: 'USD', impact: 'High', time: '08:30', tz: NY, when: { every: 'month', nth: -1, weekday: 'Fri' }, values: pct(0.2, 0.1) },
  { title: 'Federal Funds Rate', country: 'USD', impact: 'High', time: '14:00', tz: NY, when: { every: 'month', nth: -1, weekday: 'Wed', months: [1, 4, 7, 10] }, values: pct(4.25, 0, 2) },
  { title: 'Federal Funds Rate', country: 'USD', impact: 'High', time: '14:00', tz: NY, when: { every: 'month', nth: 3, weekday: 'Wed', months: [3, 6, 9] }, values: pct(4.25, 0, 2) },
  { title: 'Federal Funds Rate', country: 'USD', impact: 'High', time: '14:00', tz: NY, when: { every: 'month', nth: 2, weekday: 'Wed', months: [12] }, values: pct(4.25, 0, 2) },
  { title: 'FOMC Press Conference', country: 'USD', impact: 'High', time: '14:30', tz: NY, when: { every: 'month', nth: -1, weekday: 'Wed', months: [1, 4, 7, 10] } },
  { title: 'FOMC Press Conference', country: 'USD', impact: 'High', time: '14:30', tz: NY, when: { every: 'month', nth: 3, weekday: 'Wed', months: [3, 6, 9] } },
  { title: 'FOMC Press Conference', country: 'USD', impact: 'High', time: '14:30', tz: NY, when: { every: 'month', nth: 2, weekday: 'Wed', months: [12] } },
  // Euro area
  { title: 'Main Refinancing Rate', country: 'EUR', impact: 'High', time: '14:15', tz: FRA, when: { every: 'month', nth: 3, weekday: 'Thu', months: [1, 3, 12] }, values: pct(2.15, 0, 2) },
  { title: 'Main Refinancing Rate', country: 'EUR', impact: 'High', time: '14:15', tz: FRA, when: { every: 'month', nth: 2, weekday: 'Thu', months: [6, 9] }, values: pct(2.15, 0, 2) },
  { title: 'Main Refinancing Rate', country: 'EUR', impact: 'High', time: '14:15', tz: FRA, when: { every: 'month', nth: -1, weekday: 'Thu', months: [4, 7, 10] }, values: pct(2.15, 0, 2) },
  { title: 'ECB Press Conference', country: 'EUR', impact: 'High', time: '14:45', tz: FRA, when: { every: 'month', nth: 3, weekday: 'Thu', months: [1, 3, 12] } },
  { title: 'ECB Press Conference', country: 'EUR', impact: 'High', time: '14:45', tz: FRA, when: { every: 'month', nth: 2, weekday: 'Thu', months: [6, 9] } },
  { title: 'ECB Press Conference', country: 'EUR', impact: 'High', time: '14:45', tz: FRA, when: { every: 'month', nth: -1, weekday: 'Thu', months: [4, 7, 10] } },
  { title: 'CPI Flash Estimate y/y', country: 'EUR', impact: 'Medium', time: '11:00', tz: FRA, when: { every: 'businessDay', nth: 2 }, values: pct(2.1, 0.3) },
  { title: 'German ZEW Economic Sentiment', country: 'EUR', impact: 'Medium', time: '11:00', tz: FRA, when: { every: 'month', nth: 3, weekday: 'Tue' }, values: { center: 15, spread: 12, decimals: 1, unit: '' } },
  { title: 'German Flash Manufacturing PMI', country: 'EUR', impact: 'Medium', time: '09:30', tz: FRA, when: { every: 'monthDay', day: 23 }, values: { center: 47, spread: 2.5, decimals: 1, unit: '' } },
  // United Kingdom
  { title: 'Official Bank Rate', country: 'GBP', impact: 'High', time: '12:00', tz: LON, when: { every: 'month', nth: 1, weekday: 'Thu', months: [2, 5, 8, 11] }, values: pct(4, 0, 2) },
  { title: 'Official Bank Rate', country: 'GBP', impact: 'High', time: '12:00', tz: LON, when: { every: 'month', nth: 3, weekday: 'Thu', months: [3, 6, 9, 12] }, values: pct(4, 0, 2) },
  { title: 'CPI y/y', country: 'GBP', impact: 'High', time: '07:00', tz: LON, when: { every: 'month', nth: 3, weekday: 'Wed' }, values: pct(3.2, 0.4) },
  { title: 'GDP m/m', country: 'GBP', impact: 'Medium', time: '07:00', tz: LON, when: { every: 'monthDay', day: 13 }, values: pct(0.1, 0.2) },
  // Japan, Australia, Canada, Switzerland, New Zealand
  { title: 'BOJ Policy Rate', country: 'JPY', impact: 'High', time: '12:00', tz: TYO, when: { every: 'month', nth: 3, weekday: 'Fri', months: [1, 3, 4, 6, 7, 9, 10, 12] }, values: pct(0.5, 0, 2) },
  { title: 'Tokyo Core CPI y/y', country: 'JPY', impact: 'Low', time: '08:30', tz: TYO, when: { every: 'month', nth: -1, weekday: 'Fri' }, values: pct(2.4, 0.3) },
  { title: 'Employment Change', country: 'AUD', impact: 'High', time: '11:30', tz: SYD, when: { every: 'month', nth: 3, weekday: 'Thu' }, values: { center: 25, spread: 20, decimals: 1, unit: 'K' } },
  { title: 'Cash Rate', country: 'AUD', impact: 'High', time: '14:30', tz: SYD, when: { every: 'month', nth: 1, weekday: 'Tue', months: [2, 4, 5, 7, 8, 9, 11, 12] }, values: pct(3.6, 0, 2) },
  { title: 'Employment Change', country: 'CAD', impact: 'High', time: '08:30', tz: NY, when: nfpDay, values: { center: 20, spread: 25, decimals: 1, unit: 'K' } },
  { title: 'Overnight Rate', country: 'CAD', impact: 'High', time: '09:45', tz: NY, when: { every: 'month', nth: 4, weekday: 'Wed', months: [1, 3, 4, 6, 7, 9, 10, 12] }, values: pct(2.5, 0, 2) },
  { title: 'SNB Policy Rate', country: 'CHF', impact: 'High', time: '09:30', tz: ZRH, when: { every: 'month', nth: 3, weekday: 'Thu', months: [3, 6, 9, 12] }, values: pct(0, 0, 2) },
  { title: 'Official Cash Rate', country: 'NZD', impact: 'High', time: '14:00', tz: WLG, when: { every: 'month', nth: -1, weekday: 'Wed', months: [2, 4, 5, 7, 8, 10, 11] }, values: pct(3, 0, 2) },
];
