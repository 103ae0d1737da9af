// Small building blocks shared by the pages. Every value lands in the DOM as text.
import { html, useCallback, useEffect, useRef, useState } from './lib.js';

const TONE = {
  ACTIVE: 'ok', connected: 'ok', active: 'ok', up: 'ok',
  BUILDING_SERVER: 'warn', connecting: 'warn', reconnecting: 'warn', replaced: 'mute',
  refused: 'bad', revoked: 'mute', down: 'bad',
  High: 'bad', Medium: 'warn', Low: 'info', Holiday: 'mute',
};

export function Badge({ value, tone }) {
  if (value === null || value === undefined || value === '') return html`<span class="badge b-mute">none</span>`;
  return html`<span class=${`badge b-${tone ?? TONE[value] ?? 'mute'}`}>${String(value)}</span>`;
}

/** A wait in words: `30 s`, `10 min`. */
function wait(sec) {
  return sec < 90 ? `${Math.ceil(sec)} s` : `${Math.ceil(sec / 60)} min`;
}

/**
 * An error in words (a 429 or 503 says when to try again). `reveal`: the error answers an action
 * the operator took, maybe at the foot of a long table: it is scrolled into the window.
 */
/** A ref whose element is scrolled into the window when `what` appears or changes (and `reveal`):
 *  an outcome of an action taken far down a long table is said where the operator looks. */
export function useReveal(what, reveal = true) {
  const ref = useRef(null);
  useEffect(() => {
    if (reveal && what) ref.current?.scrollIntoView({ block: 'nearest' });
  }, [reveal, what]);
  return ref;
}

export function Err({ error, reveal }) {
  const ref = useReveal(error, reveal);
  if (!error) return null;
  const code = error.code ? `${error.code}: ` : '';
  const retry = error.retryAfter ? ` · try again in ${wait(error.retryAfter)}` : '';
  return html`<div class="err" role="alert" ref=${ref}>${code}${error.message ?? String(error)}${retry}</div>`;
}

/**
 * What an empty table says: `none` once the list arrived empty; while it has not arrived, that it
 * is on its way or (`error`) not available, never that there is none.
 */
export function emptyText(data, error, none) {
  if (data !== undefined) return none;
  return error ? 'Not available: the list did not arrive (the error is above).' : 'Loading…';
}

/** Polls `load` every `ms` (and at once); returns { data, error, at, reload }; `at` is when the data shown arrived. */
export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState({ data: undefined, error: undefined, at: 0 });
  const alive = useRef(true);
  const run = useCallback(async () => {
    try {
      const data = await load();
      if (alive.current) setState({ data, error: undefined, at: Date.now() });
    } catch (err) {
      // `at` stays the time of the last good answer: the page says how old its figures are. A poll
      // does try again, and says so when the gateway does not answer.
      const error = err.status === 0 ? { status: 0, code: err.code, message: `${err.message} Retrying every ${Number((ms / 1000).toFixed(1))} s.` } : err;
      if (alive.current) setState((s) => ({ ...s, error }));
    }
  }, deps);
  useEffect(() => {
    alive.current = true;
    run();
    const t = setInterval(run, ms);
    return () => { alive.current = false; clearInterval(t); };
  }, [run, ms]);
  return { ...state, reload: run };
}

/** The same buttons (by data-testid) in the nearest table rows after `tr` and before it. */
function sameButtonsBeside(tr, testid) {
  const out = [];
  for (const dir of ['nextElementSibling', 'previousElementSibling']) {
    for (let r = tr?.[dir]; r; r = r[dir]) {
      const b = r.querySelector(`[data-testid="${testid}"]`);
      if (b) { out.push(b); break; }
    }
  }
  return out;
}

/**
 * A destructive action in two clicks: the first arms the button for 4 s. When the action takes
 * the button's row away (a key revoked, a seat deleted), the focus goes to the same button of the
 * next row (or the previous one), not to the top of the page: the keyboard keeps its place.
 */
export function ConfirmButton({ label, confirm, onConfirm, disabled, testid }) {
  const [armed, setArmed] = useState(false);
  const ref = useRef(null);
  useEffect(() => {
    if (!armed) return undefined;
    const t = setTimeout(() => setArmed(false), 4000);
    return () => clearTimeout(t);
  }, [armed]);
  const fire = async () => {
    const button = ref.current;
    const hadFocus = document.activeElement === button;
    // Found now: a row taken out of the table has no siblings any more.
    const beside = sameButtonsBeside(button?.closest('tr'), testid);
    await onConfirm();
    if (!hadFocus || button?.isConnected || document.activeElement !== document.body) return;
    beside.find((b) => b.isConnected)?.focus();
  };
  return html`<button class=${`sm danger${armed ? ' armed' : ''}`} data-testid=${testid} disabled=${disabled} ref=${ref}
    onClick=${() => { if (armed) { setArmed(false); fire(); } else setArmed(true); }}>${armed ? confirm : label}</button>`;
}

async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  // Plain-http consoles on another host have no clipboard API: the key is selected for Ctrl-C instead.
  throw new Error('this page has no clipboard access over plain HTTP');
}

/**
 * A secret shown once: the value, a copy button, and a dismiss that forgets it. It comes into the
 * window with the focus on Copy: the action that made it may have been far down a long list.
 */
export function Secret({ title, value, note, onDone }) {
  const [copied, setCopied] = useState('');
  const ref = useRef(null);
  const box = useRef(null);
  const copyButton = useRef(null);
  useEffect(() => {
    box.current?.scrollIntoView({ block: 'nearest' });
    copyButton.current?.focus({ preventScroll: true });
  }, [value]);
  const copy = async () => {
    try {
      await copyText(value);
      setCopied('Copied');
    } catch (e) {
      const r = document.createRange();
      r.selectNodeContents(ref.current);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(r);
      // No clipboard (plain HTTP) or one that refused (a permission): the key is selected already.
      setCopied(`Selected: copy it with Ctrl-C (⌘-C); ${String(e.message).replace(/\.$/, '')}`);
    }
  };
  return html`<div class="secret" data-testid="secret" ref=${box}>
    <h3>${title}</h3>
    <div class="val"><code ref=${ref} data-testid="secret-value">${value}</code>
      <button class="sm" onClick=${copy} data-testid="copy" ref=${copyButton}>Copy</button>
      <button class="sm" onClick=${onDone} data-testid="secret-done">I stored it</button></div>
    <div class="note">${copied ? `${copied}. ` : ''}${note ?? 'Shown once: only a hash is stored, it cannot be shown again.'}</div>
  </div>`;
}

export function ago(iso, now = Date.now()) {
  if (!iso) return '—';
  const s = Math.round((now - Date.parse(iso)) / 1000);
  if (s < 0) return 'just now';
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

export function utc(iso) {
  return iso ? iso.replace('T', ' ').replace(/\.\d+Z$|Z$/, '') : '—';
}

export function duration(sec) {
  const d = Math.floor(sec / 86400), h = Math.floor((sec % 86400) / 3600), m = Math.floor((sec % 3600) / 60), s = sec % 60;
  return d ? `${d}d ${h}h ${m}m` : h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
}

export function ms(seconds) {
  if (seconds === undefined) return '—';
  if (seconds === Infinity) return '> 5 s';
  const v = seconds * 1000;
  return `≤ ${v < 1 ? v.toFixed(2) : v < 10 ? v.toFixed(1) : Math.round(v)} ms`;
}

export const short = (id) => (id ? `${id.slice(0, 8)}…` : '—');

/** The page's title bar; `at` (ms) shows when live data last arrived. */
export function Top({ title, at, error, children }) {
  const stale = error || (at && Date.now() - at > 10_000);
  return html`<div class="top"><h1>${title}</h1><div class="right">${children}
    ${at ? html`<span class="nowrap" data-testid="updated"><span class=${`live-dot${stale ? ' stale' : ''}`}></span> ${stale ? 'stale' : 'live'} · ${new Date(at).toISOString().slice(11, 19)} UTC</span>` : null}
  </div></div>`;
}

/**
 * A form's submit: `busy` while `f` runs, its error kept for display (mapped by `explain` when
 * given). Returns { busy, error, submit } where submit is the onSubmit handler.
 */
export function useSubmit(f, explain = (err) => err) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e?.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await f();
    } catch (err) {
      setError(explain(err));
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, submit };
}
