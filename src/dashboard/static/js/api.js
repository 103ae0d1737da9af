// The console's only way to the gateway: same-origin fetch with the management key from
// sessionStorage (never a cookie, a URL or a log line). A 401 to the management key signs the tab
// out: the key was rotated or revoked, possibly from another tab or by the CLI.
const KEY = 'tagw.managementKey';
const listeners = new Set();
/** The live view's read-only key of an account (`LIVE_KEY + id`: `{ id, key }`), kept in localStorage:
 *  one per account and browser, shared by its tabs (pages/live.js). */
export const LIVE_KEY = 'tagw.liveKey.';
export const LIVE_LABEL = 'console live view';

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set(key) { sessionStorage.setItem(KEY, key); },
  clear() {
    for (const k of Object.keys(sessionStorage)) if (k.startsWith('tagw.')) sessionStorage.removeItem(k);
  },
};

/** Called with a reason when the tab is signed out. */
export function onSignOut(f) { listeners.add(f); return () => listeners.delete(f); }

/**
 * Signing out on purpose: the read-only keys the live view keeps in this browser are revoked and
 * forgotten first (best effort; the browser's other tabs make new ones when they need them). A tab
 * simply closed leaves its key for the next live view of the account; one a browser lost is revoked
 * by the next live view of its account after an hour unused (pages/live.js).
 */
export async function signOutNow() {
  const names = Object.keys(localStorage).filter((k) => k.startsWith(LIVE_KEY));
  const ids = names.map((k) => { try { return JSON.parse(localStorage.getItem(k))?.id; } catch { return undefined; } })
    // A tab opened before the console kept them in localStorage: its keys were in sessionStorage.
    .concat(Object.keys(sessionStorage).filter((k) => k.startsWith('tagw.liveKeyId.')).map((k) => sessionStorage.getItem(k)))
    .filter(Boolean);
  await Promise.allSettled(ids.map((id) => api.del(`/v1/keys/${encodeURIComponent(id)}`)));
  for (const k of names) localStorage.removeItem(k);
  signOut('Signed out.');
}

export function signOut(reason) {
  session.clear();
  for (const f of listeners) f(reason);
}

export class ApiError extends Error {
  /** `retryAfter`: the seconds a 429 or 503 asked to wait (its retry-after header), when it said. */
  constructor(status, code, message, retryAfter) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

/** How long a read (GET) may take, answer and body, before it fails: a gateway that accepts
 *  connections and answers nothing (stopped by SIGSTOP, its event loop stuck, packets dropped) left
 *  the polls waiting for ever, and the page said "live". Writes are not cut short (one may still act). */
export const READ_TIMEOUT_MS = 10_000;

/**
 * fetch and the body's text, with "the gateway does not answer" in words: the browser's own ("Failed
 * to fetch") tell an operator nothing. With `timeoutMs`, cut short after that long.
 */
async function reach(path, init, timeoutMs) {
  const ctl = timeoutMs ? new AbortController() : undefined;
  const timer = ctl ? setTimeout(() => ctl.abort(), timeoutMs) : undefined;
  try {
    const r = await fetch(path, ctl ? { ...init, signal: ctl.signal } : init);
    return { r, text: await r.text() };
  } catch {
    // No "retrying" here: a sign-in or a key being created is not tried again (a poll says so itself).
    if (ctl?.signal.aborted) throw new ApiError(0, 'TIMEOUT', `The gateway did not answer within ${timeoutMs / 1000} s (frozen, overloaded or the network is down).`);
    throw new ApiError(0, 'UNREACHABLE', 'The gateway does not answer (stopped, restarting or the network is down).');
  } finally {
    clearTimeout(timer);
  }
}

async function call(method, path, { body, apiKey, mk, timeoutMs = method === 'GET' ? READ_TIMEOUT_MS : undefined } = {}) {
  const headers = {};
  if (apiKey) headers['x-api-key'] = apiKey;
  else {
    const key = mk ?? session.key;
    if (key) headers.authorization = `Bearer ${key}`;
  }
  const init = { method, headers, cache: 'no-store', credentials: 'omit' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const { r, text } = await reach(path, init, timeoutMs);
  let data = text;
  if ((r.headers.get('content-type') || '').includes('json')) {
    try { data = JSON.parse(text); } catch { /* keep the text */ }
  }
  if (!r.ok) {
    const code = data && typeof data === 'object' ? data.error : undefined;
    // A body that is not the gateway's JSON (a proxy's HTML error page) is never shown raw.
    const message = data && typeof data === 'object' ? data.message : `The gateway answered HTTP ${r.status}${r.statusText ? ` ${r.statusText}` : ''}.`;
    if (r.status === 401 && !apiKey && !mk && session.key) {
      signOut('The management key stopped working (it was rotated or revoked). Sign in with the current one.');
    }
    const wait = Number(r.headers.get('retry-after'));
    throw new ApiError(r.status, code, message, wait > 0 ? wait : undefined);
  }
  return data;
}

export const api = {
  get: (path, o) => call('GET', path, o),
  post: (path, body, o) => call('POST', path, { ...o, body: body ?? {} }),
  put: (path, body, o) => call('PUT', path, { ...o, body: body ?? {} }),
  del: (path, o) => call('DELETE', path, o),
};

/** /metrics as text (no key needed). */
export async function metricsText() {
  const { r, text } = await reach('/metrics', { cache: 'no-store', credentials: 'omit' }, READ_TIMEOUT_MS);
  if (!r.ok) throw new ApiError(r.status, 'METRICS', `/metrics answered ${r.status}`);
  return text;
}
