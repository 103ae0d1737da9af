// Seats and accounts: create (shared, or private: BUILDING_SERVER turning ACTIVE), bind a broker
// login (/ConnectEx), reconnect (rolling upgrade), delete; each account's connection phase with
// its history. Refreshed every 1.5 s.
import { api } from '../api.js';
import { Fragment, html, useState } from '../lib.js';
import { ago, Badge, ConfirmButton, emptyText, Err, Top, usePoll, useReveal, useSubmit, utc } from '../ui.js';

const SERVERS = ['Sim-P5-Demo', 'Sim-P4-Demo'];

function CreateSeat({ onDone }) {
  const [priv, setPriv] = useState(false);
  const [region, setRegion] = useState('us-east');
  const { busy, error, submit } = useSubmit(async () => {
    onDone(await api.post('/v1/seats', priv ? { privateHosting: true, region: region.trim() || undefined } : { privateHosting: false }));
  });
  return html`<form class="row" onSubmit=${submit} data-testid="create-seat">
    <label class="f">Hosting
      <select data-testid="hosting" value=${priv ? 'private' : 'shared'} onChange=${(e) => setPriv(e.target.value === 'private')}>
        <option value="shared">Shared (14 USD/month)</option><option value="private">Private (17 USD/month)</option>
      </select></label>
    ${priv ? html`<label class="f">Region<input data-testid="region" value=${region} onInput=${(e) => setRegion(e.target.value)} /></label>` : null}
    <button class="primary" type="submit" disabled=${busy} data-testid="create-seat-btn">Create seat</button>
    <${Err} error=${error} />
  </form>`;
}

function BindLogin({ id, onDone }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [server, setServer] = useState(SERVERS[0]);
  const { busy, error, submit } = useSubmit(async () => {
    await api.post('/ConnectEx', { user: user.trim(), password, server: server.trim(), id });
    setPassword('');
    onDone();
  });
  return html`<form class="row" onSubmit=${submit} data-testid="bind-form">
    <label class="f">Broker login<input data-testid="bind-user" autocomplete="off" value=${user} onInput=${(e) => setUser(e.target.value)} /></label>
    <label class="f">Password<input data-testid="bind-password" type="password" autocomplete="new-password" value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
    <label class="f">Server<input data-testid="bind-server" list="servers" value=${server} onInput=${(e) => setServer(e.target.value)} /></label>
    <datalist id="servers">${SERVERS.map((s) => html`<option value=${s} />`)}</datalist>
    <button class="primary" type="submit" disabled=${busy || !user.trim() || !password} data-testid="bind-submit">${busy ? 'Connecting…' : 'Bind and connect'}</button>
    <${Err} error=${error} />
  </form>`;
}

function History({ conn }) {
  if (!conn || conn.history.length === 0) return html`<p class="note">No connection events yet.</p>`;
  return html`<ul class="history" data-testid="history">${[...conn.history].reverse().map((h) => html`<li><span class="mono muted">${utc(h.at)}</span><${Badge} value=${h.phase} /></li>`)}</ul>`;
}

/** The seat just created, said under the form: in a long table its row is far down, at the end.
 *  Its status as the table has it now (`now`; not listed yet: as it was made). */
function Created({ seat, now }) {
  if (!seat) return null;
  const { status } = now ?? seat;
  const words = status !== 'ACTIVE' ? `${status}, ACTIVE when its server is built` : seat.status === 'ACTIVE' ? 'ACTIVE' : 'its server is built: it is ACTIVE';
  return html`<p class="note" role="status" data-testid="seat-created">Seat <span class="mono select-all">${seat.id}</span> created
    (${words}); the table lists seats oldest first: it is at the end.</p>`;
}

/** A seat deleted: said where its row was (where the operator looks), with the keys that went with it. */
function Deleted({ result }) {
  const ref = useReveal(result);
  const keys = result.revokedKeys ?? [];
  return html`<tr><td colspan="9"><p class="note" role="status" ref=${ref} data-testid="seat-deleted">Seat <span class="mono select-all">${result.id}</span> deleted${keys.length > 0
    ? html`; ${keys.length === 1 ? 'the key' : `the ${keys.length} keys`} scoped to it revoked: <span class="mono">${keys.join(', ')}</span>` : ' (no key was scoped to it)'}.</p></td></tr>`;
}

export function Seats({ title }) {
  const [open, setOpen] = useState(null);
  const [error, setError] = useState(null);
  const [created, setCreated] = useState(null);
  const { data, error: pollError, at, reload } = usePoll(async () => {
    const [seats, conns] = await Promise.all([api.get('/v1/seats'), api.get('/v1/accounts/connections')]);
    return { seats: seats.seats, conns: Object.fromEntries(conns.accounts.map((a) => [a.id, a])) };
  }, 1500);
  const [deleted, setDeleted] = useState(null);
  const act = (f) => async () => {
    setError(null);
    setDeleted(null);
    try { await f(); await reload(); } catch (err) { setError(err); }
  };
  const seats = data?.seats ?? [];
  return html`
    <${Top} title=${title} at=${at} error=${pollError} />
    <div class="panel"><h2>New seat</h2><${CreateSeat} onDone=${(seat) => { setCreated(seat); reload(); }} /><${Created} seat=${created} now=${created ? seats.find((s) => s.id === created.id) : undefined} /></div>
    <${Err} error=${error ?? pollError} reveal=${Boolean(error)} />
    <div class="panel cq">
      <h2>Seats <span class="muted small">${data ? `${seats.length} total` : ''}</span></h2>
      <table data-testid="seats"><thead><tr>
        <th>account id</th><th>hosting</th><th>seat</th><th>broker</th><th>connection</th><th>synced</th><th>since</th><th>last error</th><th></th>
      </tr></thead><tbody>
        ${seats.length === 0 ? html`<tr><td colspan="9" class="empty">${emptyText(data, pollError, 'No seats yet: create one above, or bind a broker login with /ConnectEx.')}</td></tr>` : null}
        ${seats.map((s, i) => {
          const c = data.conns[s.id];
          const expanded = open === s.id;
          return html`<${Fragment} key=${s.id}>
          ${deleted?.at === i ? html`<${Deleted} result=${deleted} />` : null}
          <tr data-testid="seat-row" data-id=${s.id}>
            <td class="mono select-all nowrap" data-testid="seat-id">${s.id}</td>
            <td>${s.privateHosting ? `private${s.region ? ` · ${s.region}` : ''}` : 'shared'}</td>
            <td data-testid="seat-status"><${Badge} value=${s.status} /></td>
            <td>${c?.server ? `${c.platform} · ${c.server}` : html`<span class="muted">no login</span>`}</td>
            <td data-testid="conn-phase">${c?.phase ? html`<${Badge} value=${c.phase} />` : c?.owner ? html`<span class="muted" data-testid="conn-owner">on ${c.owner}</span>` : html`<span class="muted">—</span>`}</td>
            <td>${c?.server && !(c.phase === null && c.owner) ? (c.synced ? 'yes' : 'no') : '—'}</td>
            <td class="nowrap">${ago(c?.since)}</td>
            <td class="nowrap">${c?.lastError ? html`<${Badge} value=${c.lastError.phase} /> <span class="muted">${ago(c.lastError.at)}</span>` : '—'}</td>
            <td class="actions">
              <button class="sm" data-testid="seat-more" onClick=${() => setOpen(expanded ? null : s.id)}>${expanded ? 'Close' : c?.server ? 'Details' : 'Bind login'}</button>
              ${c?.server ? html`<button class="sm" data-testid="reconnect" onClick=${act(() => api.post(`/v1/accounts/${s.id}/upgrade`, {}))}>Reconnect</button>` : null}
              ${s.status === 'ACTIVE' && c?.server ? html`<a class="btn sm" href=${`#/live/${s.id}`} data-testid="open-live">Live</a>` : null}
              <a class="btn sm" href=${`#/keys/${s.id}`} data-testid="seat-keys" title="this seat's keys">Keys</a>
              <${ConfirmButton} label="Delete" confirm="Delete seat?" testid="delete-seat" onConfirm=${act(async () => setDeleted({ ...(await api.del(`/v1/seats/${s.id}`)), at: i }))} />
            </td>
          </tr>
          ${expanded ? html`<tr><td colspan="9">
            <div class="grid g2 expand">
              <div><h2 class="muted small">Bind a broker login ${c?.server ? '(replaces the current one)' : ''}</h2><${BindLogin} id=${s.id} onDone=${() => reload()} /></div>
              <div><h2 class="muted small">Connection history</h2><${History} conn=${c} /></div>
            </div>
          </td></tr>` : null}
          </${Fragment}>`;
        })}
        ${deleted && deleted.at >= seats.length ? html`<${Deleted} result=${deleted} />` : null}
      </tbody></table>
    </div>`;
}
