// API keys: create full-access keys, or read-only / account-scoped keys for a seat; the secret is
// shown once with a copy button; list (never a secret); revoke; replace (new key shown once, the
// old one revoked in the same step); each key's own rate limits, shown and set.
import { api } from '../api.js';
import { Fragment, html, useState } from '../lib.js';
import { ago, Badge, ConfirmButton, emptyText, Err, Secret, short, Top, usePoll, useSubmit, utc } from '../ui.js';

function CreateKey({ seats, seatId, onCreated }) {
  const [label, setLabel] = useState('');
  const [seat, setSeat] = useState(seatId || '');
  const [readOnly, setReadOnly] = useState(Boolean(seatId));
  const [scoped, setScoped] = useState(Boolean(seatId));
  const { busy, error, submit } = useSubmit(async () => {
    const body = { label: label.trim() };
    const k = seat
      ? await api.post(`/v1/seats/${seat}/keys`, { ...body, readOnly, accountScoped: scoped })
      : await api.post('/v1/keys', body);
    setLabel('');
    onCreated(k);
  });
  return html`<form class="row" onSubmit=${submit} data-testid="create-key">
    <label class="f">Label<input data-testid="key-label" maxlength="100" value=${label} onInput=${(e) => setLabel(e.target.value)} placeholder="my-bot" /></label>
    <label class="f">For
      <select data-testid="key-seat" value=${seat} onChange=${(e) => { setSeat(e.target.value); if (!e.target.value) { setReadOnly(false); setScoped(false); } }}>
        <option value="">Full access (every account)</option>
        ${seats.map((s) => html`<option value=${s.id}>seat ${short(s.id)} (${s.privateHosting ? 'private' : 'shared'})</option>`)}
      </select></label>
    ${seat ? html`
      <label class="c"><input type="checkbox" data-testid="key-readonly" checked=${readOnly} onChange=${(e) => setReadOnly(e.target.checked)} /> read-only</label>
      <label class="c"><input type="checkbox" data-testid="key-scoped" checked=${scoped} onChange=${(e) => setScoped(e.target.checked)} /> only this account</label>` : null}
    <button class="primary" type="submit" disabled=${busy || !label.trim()} data-testid="create-key-btn">Create key</button>
    ${seat && !scoped ? html`<p class="note" data-testid="key-unscoped-note">Without <em>only this account</em> the key works for every account${readOnly ? ' (read-only)' : ''}: the gateway does not tie it to this seat, and the seat's Keys do not list it.</p>` : null}
    <${Err} error=${error} />
  </form>`;
}

async function listKeys() {
  try {
    return (await api.get('/v1/keys?kind=all')).keys;
  } catch (err) {
    // A gateway without the kind filter answers 400: its plain list is API keys only.
    if (err.status === 400) return (await api.get('/v1/keys')).keys;
    throw err;
  }
}

/**
 * A key's limit in words: its own, or the gateway's default (null; shown muted, the legend says
 * so, which keeps the column narrow), 0 being unlimited.
 */
function Limit({ v, dflt, unit }) {
  const own = v !== null && v !== undefined;
  const n = own ? v : dflt;
  const words = n === undefined ? 'default' : n === 0 ? 'unlimited' : `${n} ${unit}`;
  return html`<div class=${own ? '' : 'muted'} data-default=${own ? 'no' : 'yes'} title=${own ? 'this key\'s own limit' : 'the gateway\'s default'}>${words}</div>`;
}

function LimitsForm({ k, defaults, onDone }) {
  const [req, setReq] = useState(k.requestsPerSec ?? '');
  const [ord, setOrd] = useState(k.ordersPerSec ?? '');
  const num = (v) => (String(v).trim() === '' ? null : Number(v));
  const { busy, error, submit } = useSubmit(async () => {
    await api.put(`/v1/keys/${k.id}/limits`, { requestsPerSec: num(req), ordersPerSec: num(ord) });
    onDone();
  });
  return html`<form class="row" onSubmit=${submit} data-testid="limits-form">
    <label class="f">Requests per second<input type="number" min="0" step="any" data-testid="limit-requests" value=${req} placeholder=${`default${defaults.req === undefined ? '' : ` (${defaults.req})`}`} onInput=${(e) => setReq(e.target.value)} /></label>
    <label class="f">Orders per second<input type="number" min="0" step="any" data-testid="limit-orders" value=${ord} placeholder=${`default${defaults.orders === undefined ? '' : ` (${defaults.orders})`}`} onInput=${(e) => setOrd(e.target.value)} /></label>
    <button class="primary" type="submit" disabled=${busy} data-testid="limits-save">Save limits</button>
    <span class="note">Empty: the gateway's default. 0: unlimited. Over a limit the key gets 429 from its next request on.</span>
    <${Err} error=${error} />
  </form>`;
}

function state(k) {
  if (k.replacedBy) return html`<${Badge} value="replaced" /> <span class="muted small">by ${short(k.replacedBy)}</span>`;
  if (k.revoked) return html`<${Badge} value="revoked" />`;
  return html`<${Badge} value="active" />`;
}

/** The list shows one seat's keys: which seat (one that is gone said so), and the way back to every key. */
function SeatFilter({ seatId, seats }) {
  const gone = seats && !seats.some((s) => s.id === seatId);
  return html`<div class="filter" role="status" data-testid="keys-filter">
    <span>Keys of seat <span class="mono select-all wrap-any">${seatId}</span>${gone ? html` <span class="muted">(no such seat: deleted?)</span>` : null}</span>
    <a class="btn sm" href="#/keys" data-testid="keys-filter-clear">Show all keys</a>
  </div>`;
}

export function Keys({ title, arg }) {
  const [secret, setSecret] = useState(null);
  const [error, setError] = useState(null);
  const [showRevoked, setShowRevoked] = useState(false);
  const { data, error: pollError, at, reload } = usePoll(async () => {
    const [keys, seats] = await Promise.all([listKeys(), api.get('/v1/seats')]);
    return { keys, seats: seats.seats };
  }, 3000);
  const act = (f) => async () => {
    setError(null);
    try { await f(); await reload(); } catch (err) { setError(err); }
  };
  const [editing, setEditing] = useState(null);
  // The gateway's defaults (KEY_REQUESTS_PER_SEC, KEY_ORDERS_PER_SEC): a key without its own limits has these.
  const status = usePoll(() => api.get('/v1/status'), 60_000);
  const defaults = { req: status.data?.config?.keyRequestsPerSec, orders: status.data?.config?.keyOrdersPerSec };
  // #/keys/<seat id> (a seat's Keys link): that seat's keys only; the URL keeps the filter.
  const seatId = arg || '';
  const keys = (data?.keys ?? []).filter((k) => (showRevoked || !k.revoked) && (!seatId || k.seatId === seatId));
  return html`
    <${Top} title=${title} at=${at} error=${pollError} />
    <div class="panel"><h2>New key</h2>
      <${CreateKey} key=${seatId} seats=${data?.seats ?? []} seatId=${seatId} onCreated=${(k) => { setSecret({ title: `New key "${k.label}"`, value: k.key }); reload(); }} />
      <p class="note">Browser pages should get a read-only key scoped to one account: it is visible to anyone who opens the page.</p>
    </div>
    ${secret ? html`<${Secret} title=${secret.title} value=${secret.value} onDone=${() => setSecret(null)} />` : null}
    <${Err} error=${error ?? pollError} reveal=${Boolean(error)} />
    <div class="panel cq">
      <h2>Keys <label class="c small"><input type="checkbox" checked=${showRevoked} onChange=${(e) => setShowRevoked(e.target.checked)} /> show revoked</label></h2>
      ${seatId ? html`<${SeatFilter} seatId=${seatId} seats=${data?.seats} />` : null}
      <table data-testid="keys"><thead><tr>
        <th>label</th><th>id</th><th>kind</th><th>scope</th><th>rights</th><th>limits</th><th>created</th><th>last used</th><th>state</th><th></th>
      </tr></thead><tbody>
        ${keys.length === 0 ? html`<tr><td colspan="10" class="empty">${emptyText(data, pollError, seatId ? 'No keys for this seat: create one above.' : 'No keys.')}</td></tr>` : null}
        ${keys.map((k) => html`<${Fragment} key=${k.id}><tr data-testid="key-row" data-id=${k.id}>
          <td class="label" data-testid="key-label-cell">${k.label}</td>
          <td class="mono">${k.id}</td>
          <td>${k.kind ?? 'api'}</td>
          <td class="nowrap">${k.kind === 'management' ? 'gateway' : k.accountScoped ? html`seat <span class="mono">${short(k.seatId)}</span>` : 'all accounts'}</td>
          <td>${k.kind === 'management' ? 'provisioning' : k.readOnly ? 'read-only' : 'full'}</td>
          <td class="nowrap" data-testid="key-limits">${k.kind === 'management' ? '—' : html`<${Limit} v=${k.requestsPerSec} dflt=${defaults.req} unit="req/s" /><${Limit} v=${k.ordersPerSec} dflt=${defaults.orders} unit="orders/s" />`}</td>
          <td title=${k.createdAt}>${utc(k.createdAt).split(' ').map((part) => html`<span class="nowrap">${part}</span> `)}</td>
          <td class="nowrap" title=${k.lastUsedAt ?? ''}>${k.lastUsedAt === undefined ? '—' : ago(k.lastUsedAt)}</td>
          <td class="nowrap">${state(k)}</td>
          <td class="actions">${!k.revoked && k.kind !== 'management' ? html`
            <${ConfirmButton} label="Replace" confirm="Replace now?" testid="replace-key" onConfirm=${act(async () => {
              // The old key is revoked in the same step: two clicks, as Revoke.
              const n = await api.post(`/v1/keys/${k.id}/replace`, {});
              setSecret({ title: `Replacement for "${k.label}" (the old key is revoked)`, value: n.key });
            })} />
            <button class="sm" data-testid="key-limits-edit" onClick=${() => setEditing(editing === k.id ? null : k.id)}>${editing === k.id ? 'Close' : 'Limits'}</button>
            <${ConfirmButton} label="Revoke" confirm="Revoke now?" testid="revoke-key" onConfirm=${act(() => api.del(`/v1/keys/${k.id}`))} />` : null}
          </td>
        </tr>
        ${editing === k.id ? html`<tr><td colspan="10"><div class="expand"><${LimitsForm} k=${k} defaults=${defaults} onDone=${() => { setEditing(null); reload(); }} /></div></td></tr>` : null}
        </${Fragment}>`)}
      </tbody></table>
      <p class="note">Limits in grey are the gateway's defaults (KEY_REQUESTS_PER_SEC, KEY_ORDERS_PER_SEC); <em>Limits</em> sets a key's own.</p>
    </div>`;
}
