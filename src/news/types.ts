// A calendar event as /news returns it (SPEC §2 "Calendar event").
export const IMPACTS = ['High', 'Medium', 'Low', 'Holiday'] as const;
export type Impact = (typeof IMPACTS)[number];

export interface CalendarEvent {
  title: string;
  /** Currency code the event moves, as calendar exports use it (USD, EUR, GBP...). */
  country: string;
  impact: Impact;
  /** ISO 8601 UTC instant. */
  time: string;
  /** Empty string when unknown (exports leave it blank). */
  forecast: string;
  previous: string;
}

/** Case-insensitive impact names, plus the words and star/number forms exports use. */
export function parseImpact(raw: string): Impact | undefined {
  const s = raw.trim().toLowerCase();
  if (!s) return undefined;
  if (s === 'high' || s === '3' || s === '***' || s === '★★★' || s.startsWith('high')) return 'High';
  if (s === 'medium' || s === 'med' || s === '2' || s === '**' || s === '★★' || s.startsWith('medium')) return 'Medium';
  if (s === 'low' || s === '1' || s === '*' || s === '★' || s.startsWith('low') || s === 'non-economic') return 'Low';
  if (s === 'holiday' || s === 'bank holiday') return 'Holiday';
  return undefined;
}
