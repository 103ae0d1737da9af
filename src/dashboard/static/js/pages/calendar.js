// This week's economic calendar (/news), filterable by impact.
import { api } from '../api.js';
import { html, useState } from '../lib.js';
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
      <table data-testid="calendar"><thead><tr><th>day</th><th>time</th><th>currency</th><th>impact</th><th>event</th><th class="num">forecast</th><th class="num">previous</th></tr></thead><tbody>
        ${events.length === 0 ? html`<tr><td colspan="7" class="empty">${emptyText(data, error, 'No events.')}</td></tr>` : null}
        ${events.map((e) => {
          const d = new Date(e.time);
          const day = d.toISOString().slice(0, 10);
          const first = day !== lastDay;
          lastDay = day;
          return html`<tr class=${d.getTime() < now ? 'muted' : ''}>
            <td class="nowrap">${first ? d.toLocaleDateString('en-GB', { weekday: 'short', day: '2-digit', month: 'short', timeZone: 'UTC' }) : ''}</td>
            <td class="mono">${e.time.slice(11, 16)}</td><td class="mono">${e.country}</td><td><${Badge} value=${e.impact} /></td>
            <td>${e.title}</td><td class="num">${e.forecast || '—'}</td><td class="num">${e.previous || '—'}</td></tr>`;
        })}
      </tbody></table>
    </div>`;
}
