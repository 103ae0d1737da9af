// The console's shell: sign-in, navigation (hash routes, so no key or state ever sits in a path
// the server sees), and the pages.
import { api, onSignOut, session, signOutNow } from './api.js';
import { html, render, useEffect, useRef, useState } from './lib.js';
import { Err, useSubmit } from './ui.js';
import { Overview } from './pages/overview.js';
import { Seats } from './pages/seats.js';
import { Keys } from './pages/keys.js';
import { Settings } from './pages/settings.js';
import { Live } from './pages/live.js';
import { Calendar } from './pages/calendar.js';
import { Audit } from './pages/audit.js';

const PAGES = [
  ['overview', 'Overview', Overview],
  ['seats', 'Seats & accounts', Seats],
  ['keys', 'API keys', Keys],
  ['live', 'Live account', Live],
  ['calendar', 'Calendar', Calendar],
  ['audit', 'Audit log', Audit],
  ['settings', 'Settings', Settings],
];

function route() {
  const [name, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  const page = PAGES.find((p) => p[0] === name) ?? PAGES[0];
  return { page, arg: rest.map(decodeURIComponent).join('/') };
}

function SignIn({ reason, onIn }) {
  const [key, setKey] = useState('');
  const field = useRef(null);
  useEffect(() => field.current?.focus(), []); // the operator pastes the key at once
  const { busy, error, submit } = useSubmit(async () => {
    // Any management route checks the key; the seat list is the cheapest.
    await api.get('/v1/seats', { mk: key.trim() });
    session.set(key.trim());
    setKey('');
    onIn();
  }, (err) => {
    if (err.status !== 401) return err;
    // The likeliest mix-up: a bot's API key pasted here.
    if (key.trim().startsWith('tagw_k_')) return { message: 'That is an API key (tagw_k_…): the console needs the management key (tagw_m_…).' };
    return { message: 'That is not a valid management key.' };
  });
  return html`<div class="signin"><div class="panel">
    <h1><img src="/dashboard/favicon.svg" alt="" /> tagw operator console</h1>
    <p class="muted">Sign in with the gateway's management key (printed at the first start and kept in <code>data/bootstrap.json</code>). It stays in this tab only.</p>
    ${reason ? html`<div class="err" data-testid="signed-out">${reason}</div>` : null}
    <form onSubmit=${submit}>
      <label class="f">Management key
        <input type="password" autocomplete="off" spellcheck=${false} name="managementKey" data-testid="mk" ref=${field} value=${key} onInput=${(e) => setKey(e.target.value)} />
      </label>
      <button class="primary" type="submit" disabled=${busy || !key.trim()} data-testid="signin">Sign in</button>
    </form>
    <${Err} error=${error} />
  </div></div>`;
}

function App() {
  const [signedIn, setSignedIn] = useState(Boolean(session.key));
  const [reason, setReason] = useState(null);
  const [r, setR] = useState(route());
  useEffect(() => onSignOut((why) => { setReason(why); setSignedIn(false); }), []);
  useEffect(() => {
    const f = () => setR(route());
    addEventListener('hashchange', f);
    return () => removeEventListener('hashchange', f);
  }, []);
  if (!signedIn) {
    document.title = 'Sign in · tagw';
    return html`<${SignIn} reason=${reason} onIn=${() => { setReason(null); setSignedIn(true); }} />`;
  }
  const [id, title, Page] = r.page;
  document.title = `${title} · tagw`;
  return html`<div class="shell">
    <aside class="side">
      <div class="brand"><img src="/dashboard/favicon.svg" alt="" /><span>tagw<small>operator console</small></span></div>
      <nav class="nav">${PAGES.map(([pid, label]) => html`<a href=${`#/${pid}`} class=${pid === id ? 'active' : ''} data-testid=${`nav-${pid}`}>${label}</a>`)}</nav>
      <div class="foot"><button class="sm" data-testid="signout" onClick=${() => signOutNow()}>Sign out</button></div>
    </aside>
    <main class="main"><${Page} key=${id} arg=${r.arg} title=${title} /></main>
  </div>`;
}

const root = document.getElementById('app');
root.textContent = ''; // the static "Loading…" line: render() would keep it beside the app
render(html`<${App} />`, root);
