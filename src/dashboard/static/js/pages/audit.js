// The audit log: every management action, who (which management key), what and when. The newest
// page refreshes itself; older pages are fetched on demand (?before=), so nothing is out of reach.
import { api } from '../api.js';
import { html, useState } from '../lib.js';
import { emptyText, Err, Top, usePoll, utc } from '../ui.js';

/** An entry's detail as `name value` pairs in words, not a JSON object. A value not set (null) is
 *  `none`; in key.limits it is the gateway's default, and says so. */
function detail(d, action) {
  if (!d || typeof d !== 'object') return '';
  const unset = action === 'key.limits' ? 'default' : 'none';
  return Object.entries(d).map(([k, v]) => `${k} ${v === null ? unset : Array.isArray(v) ? (v.length ? v.join(', ') : 'none') : typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join(' · ');
}

export function Audit({ title }) {
  const { data, error, at } = usePoll(() => api.get('/v1/audit'), 5000);
  const [older, setOlder] = useState({ entries: [], next: undefined, busy: false, error: null });
  const entries = data?.entries ?? [];
  // Older pages continue from where the newest page (or the last older page) ended.
  const next = older.next === undefined ? data?.next : older.next;
  const more = async () => {
    setOlder((o) => ({ ...o, busy: true, error: null }));
    try {
      const page = await api.get(`/v1/audit?before=${next}`);
      setOlder((o) => ({ entries: [...o.entries, ...page.entries], next: page.next, busy: false, error: null }));
    } catch (err) {
      setOlder((o) => ({ ...o, busy: false, error: err }));
    }
  };
  // The newest page moves on as actions happen: an older entry it now holds is shown once.
  const seen = new Set(entries.map((e) => e.id));
  const all = [...entries, ...older.entries.filter((e) => !seen.has(e.id))];
  // A phone (narrow-only, wide-only): the target, detail and key under the action, not in columns.
  return html`
    <${Top} title=${title} at=${at} error=${error} />
    <${Err} error=${error} />
    <div class="panel"><h2>Management actions <span class="muted small">${all.length} shown, newest first</span></h2>
      <div class="scroll tall"><table class="narrow-dense stacked" data-testid="audit"><thead><tr><th>when (UTC)</th><th class="wide-only">management key</th><th>action</th><th class="wide-only">target</th><th class="wide-only">detail</th></tr></thead><tbody>
        ${all.length === 0 ? html`<tr><td colspan="5" class="empty">${emptyText(data, error, 'Nothing recorded yet.')}</td></tr>` : null}
        ${all.map((e) => html`<tr key=${e.id} data-testid="audit-row">
          <td class="mono when" data-testid="audit-when">${utc(e.at).split(' ').map((part) => html`<span class="nowrap">${part}</span> `)}</td>
          <td class="mono wide-only" data-testid="audit-key">${e.keyId}</td>
          <td data-testid="audit-action">${e.action}
            <div class="narrow-only small">
              <div class="mono wrap-any" data-testid="audit-target">${e.target ?? '—'}</div>
              ${e.detail ? html`<div class="mono muted wrap-any">${detail(e.detail, e.action)}</div>` : null}
              <div class="muted">by key <span class="mono" data-testid="audit-key">${e.keyId}</span></div>
            </div></td>
          <td class="mono nowrap wide-only" data-testid="audit-target">${e.target ?? '—'}</td>
          <td class="mono small wide-only">${detail(e.detail, e.action)}</td></tr>`)}
      </tbody></table></div>
      ${next ? html`<div class="row more"><button class="sm" data-testid="audit-older" disabled=${older.busy} onClick=${more}>${older.busy ? 'Loading…' : 'Show older'}</button></div>` : null}
      <${Err} error=${older.error} />
    </div>`;
}
