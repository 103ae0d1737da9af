// The audit log: every management action, who (which management key), what and when.
import { api } from '../api.js';
import { html } from '../lib.js';
import { Err, Top, usePoll, utc } from '../ui.js';

export function Audit({ title }) {
  const { data, error, at } = usePoll(() => api.get('/v1/audit'), 5000);
  const entries = data?.entries ?? data?.audit ?? (Array.isArray(data) ? data : []);
  return html`
    <${Top} title=${title} at=${at} error=${error} />
    <${Err} error=${error} />
    <div class="panel"><h2>Management actions <span class="muted small">newest first</span></h2>
      <div class="scroll"><table data-testid="audit"><thead><tr><th>when (UTC)</th><th>management key</th><th>action</th><th>target</th><th>detail</th></tr></thead><tbody>
        ${entries.length === 0 ? html`<tr><td colspan="5" class="empty">${error ? 'Not available.' : 'Nothing recorded yet.'}</td></tr>` : null}
        ${entries.map((e) => html`<tr><td class="mono nowrap">${utc(e.at)}</td><td class="mono">${e.keyId}</td><td>${e.action}</td><td class="mono">${e.target ?? '—'}</td><td class="mono small">${e.detail ? JSON.stringify(e.detail) : ''}</td></tr>`)}
      </tbody></table></div>
    </div>`;
}
