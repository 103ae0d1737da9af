// This week's economic calendar (/news), filterable by impact.
import { api } from '../api.js';
import { Fragment, html, useState } from '../lib.js';
import { Badge, emptyText, Err, Top, usePoll } from '../ui.js';

const IMPACTS = ['High', 'Medium', 'Low', 'Holiday'];

export function Calendar({ title }) {
  const [impact, setImpact] = useState('');
  const { data, error, at } = usePoll(() => api.get(`/news${impact ? `?impact=${impact}` : ''}`), 60_000, [impact]);
  const events = Array.isArray(data) ? data : [];
  const now = Date.now();
  let lastDay = '';
  return html`
    <${Top} title=${title} at=${at} error=${error}>
      <div class="tabs">${['', ...IMPACTS].map((i) => html`<button class=${`sm${impact === i ? ' on' : ''}`} onClick=${() => setImpact(i)}>${i || 'All'}</button>`)}</div>
    </${Top}>
    <${Err} error=${error} />
    <div class="panel"><h2>This week <span class="muted small">${data ? `${events.length} events · ` : ''}times in UTC</span></h2>
      <table class="narrow-dense" data-testid="calendar"><thead><tr><th class="wide-only">day</th><th>time</th><th>currency</th><th>impact</th><th>event</th><th class="num wide-only">forecast</th><th class="num wide-only">previous</th></tr></thead><tbody>
        ${events.length === 0 ? html`<tr><td colspan="7" class="empty">${emptyText(data, error, 'No events.')}</td></tr>` : null}
        ${events.map((e) => {
          const d = new Date(e.time);
          const day = d.toISOString().slice(0, 10);
          const first = day !== lastDay;
          lastDay = day;
          const dayName = d.toLocaleDateString('en-GB', { weekday: 'short', day: '2-digit', month: 'short', timeZone: 'UTC' });
          const past = d.getTime() < now ? 'muted' : '';
          // A phone: the day above its events (its column gives way), forecast and previous under the event.
          return html`<${Fragment} key=${`${e.time} ${e.country} ${e.title}`}>
            ${first ? html`<tr class=${`narrow-only day ${past}`}><td colspan="4" data-testid="cal-day">${dayName}</td></tr>` : null}
            <tr class=${past} data-testid="calendar-row">
            <td class="nowrap wide-only" data-testid=${first ? 'cal-day' : undefined}>${first ? dayName : ''}</td>
            <td class="mono" data-testid="cal-time">${e.time.slice(11, 16)}</td><td class="mono" data-testid="cal-currency">${e.country}</td><td data-testid="cal-impact"><${Badge} value=${e.impact} /></td>
            <td data-testid="cal-event">${e.title}${e.forecast || e.previous ? html`<div class="narrow-only muted small">forecast ${e.forecast || '—'} · previous ${e.previous || '—'}</div>` : null}</td>
            <td class="num wide-only" data-testid="cal-forecast">${e.forecast || '—'}</td><td class="num wide-only" data-testid="cal-previous">${e.previous || '—'}</td></tr>
          </${Fragment}>`;
        })}
      </tbody></table>
    </div>`;
}
