// The HTTP transport: one call = one logical request, tried again with jittered backoff when
// `shouldRetry` allows it. Platform fetch only (Node 20+, browsers), injectable for tests.
import { type BackoffOptions, type CallSafety, DEFAULT_BACKOFF, parseRetryAfter, retryWait, shouldRetry } from './backoff.js';
import { IdempotencyUncertainError, TagwError, type TagwErrorCode } from './errors.js';
import { newRequestId } from './ids.js';

export type Auth = 'api' | 'management' | 'none';
export type QueryValue = string | number | boolean | Date | readonly (string | number | boolean)[] | undefined;

export interface RetryOptions extends BackoffOptions {
  /** Tries in all, the first included (1 = never retry). */
  attempts: number;
  /** A `retry-after` longer than this is not waited for: the error is thrown instead. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryOptions = { ...DEFAULT_BACKOFF, attempts: 4, maxRetryAfterMs: 10_000 };

export interface TransportOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  managementKey?: string | undefined;
  fetch?: typeof globalThis.fetch | undefined;
  retry?: Partial<RetryOptions> | undefined;
  /** Per try, ms (default 30 s). A timed-out try counts as "no answer". */
  timeoutMs?: number | undefined;
  /** Where a socket's upgrade carries the API key: 'header' (x-api-key, out of URLs that proxies
   *  and access logs keep) where the WebSocket can send headers (Node: `ws`, undici), 'query'
   *  (`?apiKey=`) where it cannot (a browser's). Default: 'header' on Node, 'query' elsewhere. */
  webSocketKey?: 'header' | 'query' | undefined;
  random?: (() => number) | undefined;
  sleep?: ((ms: number) => Promise<void>) | undefined;
  now?: (() => number) | undefined;
}

export interface CallSpec {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  auth: Auth;
  safety: CallSafety;
  query?: Record<string, QueryValue> | undefined;
  body?: unknown;
  /** Named on the call's errors (TagwError.clientOrderId). */
  clientOrderId?: string | undefined;
  /** Tries for this call instead of the client's `retry.attempts` (1: a probe that must not wait). */
  tries?: number | undefined;
  /** Aborting it ends the call at once (its connection closed, no retry): ABORTED. */
  signal?: AbortSignal | undefined;
}

/** What one call may be given besides its parameters (`acct.OrderSend(params, { signal })`,
 *  `session.op.GetQuote(params, { signal })`). */
export interface CallOptions {
  /** Ends the call when it aborts: a try in flight is dropped, a retry wait ends, no further try is
   *  made; the call fails ABORTED (a trading call names its clientOrderId: a try already sent may
   *  have placed the order). `AbortSignal.timeout(ms)` bounds the whole call, retries included. */
  signal?: AbortSignal | undefined;
}

export interface CallResult<T> {
  status: number;
  headers: Headers;
  body: T;
  /** The gateway replayed an earlier result for this clientOrderId (`Idempotent-Replay: true`). */
  replay: boolean;
  /** Tries it took (1 = no retry). */
  tries: number;
  /** The gateway's `x-request-id` of the answer; the SDK's own id of the call when none came
   *  (a proxy that drops the header), as its errors say. */
  requestId: string;
}

/** A URL's `user:password@` as `***@` (with or without its scheme): for messages. */
function withoutUserInfo(url: string): string {
  return url.replace(/^((?:[a-z][a-z0-9+.-]*:\/\/)?)[^?#]*@/i, '$1***@');
}

/** A Date as ISO 8601; an Invalid Date (`new Date(NaN)`, a parse that failed) is the caller's
 *  mistake, a TagwError naming the parameter (before: `toISOString`'s RangeError, untyped). */
function dateText(name: string, d: Date): string {
  if (Number.isNaN(d.getTime())) throw new TagwError({ code: 'BAD_REQUEST', status: 0, message: `parameter '${name}': Invalid Date` });
  return d.toISOString();
}

export function encodeQuery(q: Record<string, QueryValue> | undefined): string {
  if (!q) return '';
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) p.append(k, String(x));
    else p.append(k, v instanceof Date ? dateText(k, v) : String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** A timer an abort clears (it resolves then): nothing is left to keep a process alive. */
function sleepReal(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

function abortedError(spec: CallSpec, requestId: string, closed: boolean): TagwError {
  return new TagwError({ code: 'ABORTED', status: 0, requestId, clientOrderId: spec.clientOrderId, message: `${spec.method} ${spec.path}: ${closed ? 'the client was closed' : 'aborted by the caller'}` });
}

/** A 3xx answer (a browser shows it as an opaque redirect, status 0): final, never followed. */
function redirectError(res: Response, spec: CallSpec, requestId: string): TagwError {
  const to = res.headers.get('location');
  return new TagwError({
    code: 'REDIRECT', status: res.status, requestId, clientOrderId: spec.clientOrderId,
    message: `${spec.method} ${spec.path}: answered ${res.status || 'a redirect'}${to ? ` to ${to}` : ''}, not followed (it would take the API key there): set baseUrl to the address that answers`,
  });
}

/** What close() ends besides the calls: the client's streams and session sockets. */
export interface Closable {
  close(): void;
}

/** Node (and runtimes that copy its `process.versions.node`): its WebSockets take headers. */
function onNode(): boolean {
  return typeof (globalThis as { process?: { versions?: { node?: unknown } } }).process?.versions?.node === 'string';
}

/** How a socket's upgrade carries the API key: query parameters to add, or headers to send. */
export interface SocketAuth {
  query: Record<string, string>;
  headers?: Record<string, string>;
}

export class Transport {
  readonly baseUrl: string;
  // Private (#): the keys are in no property that inspecting or serializing the client shows.
  readonly #apiKey: string | undefined;
  readonly #managementKey: string | undefined;
  /** One controller per call in flight, aborted by close(). Not one shared signal every call listens
   *  to: past 10 calls at once Node warns of a listener leak on it. */
  readonly #calls = new Set<AbortController>();
  #closed = false;
  readonly #open = new Set<Closable>();
  private readonly webSocketKey: 'header' | 'query';
  private readonly retry: RetryOptions;
  private readonly fetchFn: typeof globalThis.fetch;
  private readonly random: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly now: () => number;
  private readonly timeoutMs: number;

  constructor(o: TransportOptions) {
    // Checked here: a base URL without its scheme ('localhost:8080') fails every call as if the
    // network were down (retried, NETWORK_ERROR) and every socket with a throw from its constructor.
    if (!/^https?:\/\/[^/?#]/i.test(o.baseUrl ?? '')) {
      throw new TagwError({ code: 'BAD_REQUEST', status: 0, message: `baseUrl: expected http://host[:port] or https://..., got '${withoutUserInfo(String(o.baseUrl))}'` });
    }
    // One that does not parse, or holds a user and password (http://user:pw@host): fetch refuses every
    // request to it, which was retried as a NETWORK_ERROR whose message held the whole URL, password
    // included. Said here, and the messages show no user information.
    let parsed: URL;
    try {
      parsed = new URL(o.baseUrl);
    } catch {
      throw new TagwError({ code: 'BAD_REQUEST', status: 0, message: `baseUrl: not a valid URL: '${withoutUserInfo(o.baseUrl)}'` });
    }
    if (parsed.username !== '' || parsed.password !== '') {
      throw new TagwError({ code: 'BAD_REQUEST', status: 0, message: `baseUrl: holds a user name or password ('${withoutUserInfo(o.baseUrl)}'): fetch refuses such a URL; the gateway takes the API key (apiKey) and management key (managementKey) as options` });
    }
    this.baseUrl = o.baseUrl.replace(/\/+$/, '');
    this.#apiKey = o.apiKey;
    this.#managementKey = o.managementKey;
    this.webSocketKey = o.webSocketKey ?? (onNode() ? 'header' : 'query');
    this.retry = { ...DEFAULT_RETRY, ...o.retry };
    // Bound: a detached `fetch` throws "Illegal invocation" in browsers.
    this.fetchFn = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.random = o.random ?? Math.random;
    this.sleep = o.sleep ?? sleepReal;
    this.now = o.now ?? Date.now;
    this.timeoutMs = o.timeoutMs ?? 30_000;
  }

  /** The API key for a socket's upgrade (`webSocketKey`). */
  socketAuth(): SocketAuth {
    const key = this.#apiKey;
    if (!key) throw new TagwError({ code: 'API_KEY_REQUIRED', status: 0, message: 'a socket needs an API key: new TagwClient({ apiKey })' });
    return this.webSocketKey === 'header' ? { query: {}, headers: { 'x-api-key': key } } : { query: { apiKey: key } };
  }

  /** A stream or socket to close with the client; the function returned forgets it (its own close). */
  track(c: Closable): () => void {
    if (this.#closed) {
      queueMicrotask(() => c.close());
    } else this.#open.add(c);
    return () => void this.#open.delete(c);
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Ends every call in flight (ABORTED) and every tracked stream and socket; later calls fail at once. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const c of this.#calls) c.abort();
    this.#calls.clear();
    for (const c of [...this.#open]) c.close();
    this.#open.clear();
  }

  headers(auth: Auth): Record<string, string> {
    if (auth === 'api') {
      if (!this.#apiKey) throw new TagwError({ code: 'API_KEY_REQUIRED', status: 0, message: 'this call needs an API key: new TagwClient({ apiKey })' });
      return { 'x-api-key': this.#apiKey };
    }
    if (auth === 'management') {
      if (!this.#managementKey) throw new TagwError({ code: 'MANAGEMENT_KEY_REQUIRED', status: 0, message: 'this call needs the management key: new TagwClient({ managementKey })' });
      return { authorization: `Bearer ${this.#managementKey}` };
    }
    return {};
  }

  async call<T>(spec: CallSpec): Promise<CallResult<T>> {
    // One id per logical call, shared by its retries: the error names it for the bot's logs (the
    // gateway's own x-request-id when it sends one). Not sent as a header: a browser would need
    // the gateway's CORS list to allow it.
    const requestId = newRequestId();
    const headers: Record<string, string> = this.headers(spec.auth);
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers['content-type'] = 'application/json';
    }
    const url = this.baseUrl + spec.path + encodeQuery(spec.query);
    if (this.#closed) throw abortedError(spec, requestId, true);
    // The call's own controller: close() aborts it, and so does the caller's signal.
    const ctrl = new AbortController();
    const abort = () => ctrl.abort();
    this.#calls.add(ctrl);
    spec.signal?.addEventListener('abort', abort, { once: true });
    if (spec.signal?.aborted) abort();
    try {
      return await this.tries<T>(spec, url, headers, body, requestId, ctrl.signal);
    } finally {
      this.#calls.delete(ctrl);
      spec.signal?.removeEventListener('abort', abort);
    }
  }

  private async tries<T>(spec: CallSpec, url: string, headers: Record<string, string>, body: string | undefined, requestId: string, signal: AbortSignal): Promise<CallResult<T>> {
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw abortedError(spec, requestId, this.closed);
      let err: TagwError;
      try {
        const { res, text } = await this.once(url, spec.method, headers, body, signal);
        if (res.type === 'opaqueredirect' || (res.status >= 300 && res.status < 400)) throw redirectError(res, spec, requestId);
        const parsed = parseJson(text);
        if (res.ok) {
          return { status: res.status, headers: res.headers, body: parsed as T, replay: isReplay(res.headers), tries: attempt + 1, requestId: res.headers.get('x-request-id') ?? requestId };
        }
        err = this.errorOf(res, parsed, text, requestId, spec);
      } catch (e) {
        if (e instanceof TagwError) throw e;
        if (signal.aborted) throw abortedError(spec, requestId, this.closed);
        const timedOut = (e as { name?: string } | null)?.name === 'AbortError' || (e as { name?: string } | null)?.name === 'TimeoutError';
        err = new TagwError({
          code: timedOut ? 'TIMEOUT' : 'NETWORK_ERROR', status: 0, requestId, cause: e, clientOrderId: spec.clientOrderId,
          message: timedOut ? `${spec.method} ${spec.path}: no answer within ${this.timeoutMs} ms` : `${spec.method} ${spec.path}: ${(e as Error)?.message ?? String(e)}`,
        });
      }
      if (attempt + 1 >= (spec.tries ?? this.retry.attempts) || !shouldRetry(spec.safety, { status: err.status, code: err.code, final: err instanceof IdempotencyUncertainError ? err.final : undefined })) throw err;
      if (err.retryAfter !== undefined && err.retryAfter > this.retry.maxRetryAfterMs) throw err;
      await this.pause(retryWait(attempt, this.retry, this.random, err.retryAfter ?? 0), signal);
    }
  }

  /** The wait before a retry; an abort ends it at once (the loop then throws ABORTED). */
  private async pause(ms: number, signal: AbortSignal): Promise<void> {
    if (this.sleep === sleepReal) return sleepReal(ms, signal);
    let onAbort = (): void => undefined;
    const aborted = new Promise<void>((r) => signal.addEventListener('abort', (onAbort = () => r()), { once: true }));
    try {
      await Promise.race([this.sleep(ms), aborted]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** One try, the answer's body read whole: the timeout bounds both (an answer whose body stops
   *  halfway would otherwise hang the call). */
  private async once(url: string, method: string, headers: Record<string, string>, body: string | undefined, caller: AbortSignal): Promise<{ res: Response; text: string }> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    const abort = () => ctrl.abort();
    caller.addEventListener('abort', abort, { once: true });
    try {
      // Redirects are not followed: fetch would send x-api-key on to wherever one points (it drops
      // only Authorization and cookies when the origin changes), and the gateway never redirects.
      const res = await this.fetchFn(url, { method, headers, ...(body !== undefined ? { body } : {}), signal: ctrl.signal, redirect: 'manual' });
      return { res, text: await res.text() };
    } finally {
      caller.removeEventListener('abort', abort);
      clearTimeout(timer);
    }
  }

  private errorOf(res: Response, parsed: unknown, text: string, requestId: string, spec: CallSpec): TagwError {
    const b = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
    const init = {
      code: typeof b?.error === 'string' ? (b.error as TagwErrorCode) : (`HTTP_${res.status}` as const),
      status: res.status,
      message: typeof b?.message === 'string' ? b.message : text.slice(0, 200) || res.statusText,
      // A 429 RATE_LIMITED's body has the exact wait; its retry-after header rounds it up to whole
      // seconds (docs/rate-limits.md): a bot over its orders/s for a moment would wait 1 s for ms.
      retryAfter: typeof b?.retryAfterMs === 'number' && b.retryAfterMs >= 0 ? b.retryAfterMs : parseRetryAfter(res.headers.get('retry-after'), this.now()),
      requestId: res.headers.get('x-request-id') ?? requestId,
      body: b,
      clientOrderId: spec.clientOrderId,
      replayed: isReplay(res.headers),
    };
    if (init.code === 'IDEMPOTENCY_UNCERTAIN') return new IdempotencyUncertainError(init);
    return new TagwError(init);
  }
}

/** The gateway answered from an idempotency record (SPEC §4.1: `Idempotent-Replay: true`). */
const isReplay = (h: Headers): boolean => h.get('idempotent-replay') === 'true';

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
