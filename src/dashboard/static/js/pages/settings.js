// Settings: rotate the management key (the new one shown once; the old one stops at once, and
// other tabs signed in with it are signed out at their next request), and the active
// configuration with secrets redacted.
import { api, session } from '../api.js';
import { html, useState } from '../lib.js';
import { ConfirmButton, Err, Secret, Top, usePoll } from '../ui.js';

/** A setting's value; an unset one shows what applies instead, greyed (status' configUnset). */
function show(v, unset) {
  if (v === undefined || v === null) return unset ? html`<span class="muted" data-testid="unset">unset: ${unset}</span>` : '—';
  if (Array.isArray(v)) return v.length ? v.join(', ') : '(none)';
  return String(v);
}

export function Settings({ title }) {
  const [secret, setSecret] = useState(null);
  const [error, setError] = useState(null);
  const { data, error: pollError, at } = usePoll(() => api.get('/v1/status'), 5000);
  const rotate = async () => {
    setError(null);
    try {
      const r = await api.post('/v1/management-key/rotate', {});
      // This tab carries on with the new key; every other holder of the old one is refused from now on.
      session.set(r.key);
      setSecret(r.key);
    } catch (err) { setError(err); }
  };
  const config = data?.config ?? {};
  const unset = data?.configUnset ?? {};
  return html`
    <${Top} title=${title} at=${at} error=${pollError} />
    <div class="panel">
      <h2>Management key</h2>
      <p class="note">Rotating creates a new management key and revokes the one this tab signed in with, at once: scripts, the CLI and other console tabs using it are refused from their next request. <code>data/bootstrap.json</code> is rewritten when it held the old key.</p>
      <${ConfirmButton} label="Rotate management key" confirm="Rotate now: the old key stops working" testid="rotate" onConfirm=${rotate} />
      <${Err} error=${error} />
      ${secret ? html`<${Secret} title="New management key" value=${secret} note="Shown once. This tab already uses it; store it where your scripts read it." onDone=${() => setSecret(null)} />` : null}
    </div>
    <div class="panel">
      <h2>Active configuration <span class="muted small">secrets redacted; set by environment variables or TAGW_CONFIG</span></h2>
      <${Err} error=${pollError} />
      <table data-testid="config"><thead><tr><th>setting</th><th>value</th></tr></thead><tbody>
        ${Object.keys(config).sort().map((k) => html`<tr><td class="mono">${k}</td><td class="mono wrap-any">${show(config[k], unset[k])}</td></tr>`)}
      </tbody></table>
    </div>`;
}
