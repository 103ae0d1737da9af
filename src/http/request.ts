// What a handler may know about a request. uWS's HttpRequest is only valid synchronously inside
// the route callback, so everything is copied out before the first await.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { apiError } from '../errors.js';
import { closing } from './respond.js';
import { RELAY_HEADER, type ClientAddress } from './clientAddress.js';

export type QueryMap = Record<string, string | string[]>;

export interface RequestInfo {
  method: string;
  path: string;
  rawQuery: string;
  readonly query: QueryMap;
  headers: Record<string, string>;
  params: string[];
  /** Client address; read from the socket on first use (uWS copies it into a fresh buffer per call, so only when needed). */
  readonly ip: string;
  receivedAt: number;
}

/**
 * Repeated keys become arrays; `symbol=A&symbol=B` and `symbol=A,B` are both handled by the schemas.
 * A hand-rolled split: this runs on every request, and URLSearchParams costs several times more.
 */
export function parseQuery(raw: string): QueryMap {
  const out: QueryMap = Object.create(null) as QueryMap;
  if (!raw) return out;
  let start = 0;
  while (start <= raw.length) {
    let end = raw.indexOf('&', start);
    if (end < 0) end = raw.length;
    if (end > start) {
      const eq = raw.indexOf('=', start);
      const hasValue = eq >= 0 && eq < end;
      const k = decode(raw.slice(start, hasValue ? eq : end));
      const v = hasValue ? decode(raw.slice(eq + 1, end)) : '';
      const prev = out[k];
      if (prev === undefined) out[k] = v;
      else if (Array.isArray(prev)) prev.push(v);
      else out[k] = [prev, v];
    }
    start = end + 1;
  }
  return out;
}

/**
 * The raw query without parameter `name`, and that parameter's value (decoded as parseQuery does;
 * undefined when absent): for a query that differs between calls only in that parameter (an
 * idempotency id), so the rest can be validated once. Undefined when `name` comes more than once
 * or another key is percent-encoded (it might spell `name`): then only the whole query says what it means.
 */
export function splitParam(raw: string, name: string): { rest: string; value: string | undefined } | undefined {
  // Where the parameter's segment starts: at the start or after '&', its name followed by '=', '&' or the end.
  let at = -1;
  for (let i = raw.indexOf(name); i >= 0; i = raw.indexOf(name, i + 1)) {
    const after = i + name.length;
    if ((i === 0 || raw.charCodeAt(i - 1) === AMP) && (after === raw.length || raw.charCodeAt(after) === EQ || raw.charCodeAt(after) === AMP)) {
      if (at >= 0) return undefined;
      at = i;
    }
  }
  if (raw.indexOf('%') >= 0 && anyKeyEncoded(raw)) return undefined;
  if (at < 0) return { rest: raw, value: undefined };
  const after = at + name.length;
  let end = raw.indexOf('&', after);
  if (end < 0) end = raw.length;
  const value = after < end ? decode(raw.slice(after + 1, end)) : '';
  const rest = at === 0 ? raw.slice(end + 1) : end === raw.length ? raw.slice(0, at - 1) : raw.slice(0, at - 1) + raw.slice(end);
  return { rest, value };
}
const AMP = 38; // '&'
const EQ = 61; // '='

function anyKeyEncoded(raw: string): boolean {
  for (let start = 0; start < raw.length;) {
    let end = raw.indexOf('&', start);
    if (end < 0) end = raw.length;
    const eq = raw.indexOf('=', start);
    const pct = raw.indexOf('%', start);
    if (pct >= 0 && pct < end && (eq < 0 || eq >= end || pct < eq)) return true;
    start = end + 1;
  }
  return false;
}

/**
 * One value of a single-valued parameter, for handlers that read the query without a schema (the
 * WebSocket upgrades): given twice with different values it is a 400 naming it, as the query
 * schemas answer (`one` in schemas.ts), never "the first one wins"; the same value twice is that value.
 */
export function singleParam(query: QueryMap, name: string): string | undefined {
  const v = query[name];
  if (!Array.isArray(v)) return v;
  if (v.some((x) => x !== v[0])) throw apiError('BAD_REQUEST', `parameter '${name}' given more than once with different values`);
  return v[0];
}

/** application/x-www-form-urlencoded decoding ('+' is a space); a malformed escape is kept as is. */
function decode(s: string): string {
  if (s.indexOf('%') < 0 && s.indexOf('+') < 0) return s;
  const plus = s.replace(/\+/g, ' ');
  try {
    return decodeURIComponent(plus);
  } catch {
    return plus;
  }
}

/** A path parameter, percent-decoded; a malformed escape (`%ZZ`) is the client's error, a 400. */
function decodePathSegment(s: string): string {
  if (s.indexOf('%') < 0) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    throw apiError('BAD_REQUEST', 'a path segment is not valid percent-encoding');
  }
}

/**
 * The request headers handlers may read. Reading a fixed list with getHeader is cheaper than
 * walking every header, and works on uWS's JS fallback, which lacks HttpRequest.forEach.
 */
export const HEADER_NAMES = ['x-api-key', 'authorization', 'x-management-key', 'idempotency-key', 'content-length', 'x-request-id'] as const;

function queryOf(req: HttpRequest): string {
  try {
    return req.getQuery() ?? '';
  } catch {
    // uWS's JS fallback (only with ALLOW_UWS_FALLBACK=1) throws on relative URLs; read the node request it wraps.
    const url = (req as unknown as { request?: { url?: string } }).request?.url ?? '';
    const i = url.indexOf('?');
    return i < 0 ? '' : url.slice(i + 1);
  }
}

function remoteAddress(res: HttpResponse): string {
  try {
    return Buffer.from(res.getRemoteAddressAsText()).toString();
  } catch {
    // Also reached when the response was already aborted (uWS throws on access to it).
    // JS fallback: no getRemoteAddressAsText; it wraps node's ServerResponse.
    return (res as unknown as { response?: { socket?: { remoteAddress?: string } } }).response?.socket?.remoteAddress ?? 'unknown';
  }
}

function lastEntry(header: string): string {
  const i = header.lastIndexOf(',');
  return (i < 0 ? header : header.slice(i + 1)).trim();
}

/** A class, not an object literal with a getter: one stable shape, and `ip` stays lazy. */
class Request implements RequestInfo {
  private address: string | undefined;
  private parsed: QueryMap | undefined;
  readonly receivedAt = performance.now();
  constructor(
    private readonly res: HttpResponse,
    readonly method: string,
    readonly path: string,
    readonly rawQuery: string,
    readonly headers: Record<string, string>,
    readonly params: string[],
    private readonly forwarded: string | undefined,
  ) {}

  /** Split on first use: a route whose validated query is memoized never needs it. */
  get query(): QueryMap {
    return (this.parsed ??= parseQuery(this.rawQuery));
  }

  get ip(): string {
    return (this.address ??= this.forwarded || remoteAddress(this.res));
  }
}

/**
 * Every value of header `name` (uWS's getHeader gives the first only). A trading route reads them
 * all: two different Idempotency-Keys are refused rather than one silently taken, and a key that
 * reads as empty is refused rather than taken as none. (uWS's parser trims leading and trailing
 * bytes >= 0x80 of a value as if they were blanks, a signed-char comparison, so
 * `Idempotency-Key: é` reads as ''.) The JS fallback, without forEach, cannot tell.
 */
function headerValues(req: HttpRequest, name: string): readonly string[] {
  if (typeof req.forEach !== 'function') return NO_VALUES;
  wantedHeader = name;
  foundValues = undefined;
  req.forEach(collectHeader);
  const out = foundValues ?? NO_VALUES;
  foundValues = undefined;
  return out;
}
// One callback for every request (forEach runs synchronously): no closure or array per request
// unless the header came.
const NO_VALUES: readonly string[] = Object.freeze([]);
const NO_PARAMS = Object.freeze([]) as unknown as string[];
let wantedHeader = '';
let foundValues: string[] | undefined;
function collectHeader(k: string, v: string): void {
  if (k === wantedHeader) (foundValues ??= []).push(v);
}

/** Whether every value equals the first (a header given twice the same way is given once). */
function allSame(values: readonly string[]): boolean {
  for (let i = 1; i < values.length; i++) if (values[i] !== values[0]) return false;
  return true;
}

/**
 * Two Content-Length headers with different values: uWS frames the body by the first one, and a
 * proxy in front may have framed it by the other, the classic request-smuggling ingredient (RFC
 * 9112 §6.3). Refused with a 400 that closes the connection, since where this request ends is not
 * known. (The same value twice is one length. A list such as `5, 7`, or Transfer-Encoding beside
 * Content-Length, uWS refuses itself by closing the connection: docs/http.md.) Only read when a
 * Content-Length came: most requests pay nothing.
 */
export function assertOneContentLength(req: HttpRequest, first: string | undefined): void {
  if (first === undefined) return;
  const lengths = headerValues(req, 'content-length');
  if (lengths.length > 0 && (lengths[0] !== first || !allSame(lengths))) {
    throw closing(apiError('BAD_REQUEST', `two different Content-Length headers (${lengths.join(', ')}): the request cannot be framed`));
  }
}

/** The pipelining listener's client address for a relayed request. Apart from readRequest: a
 *  closure there capturing `res` made V8 allocate a context for it at every request. */
function relayedPeerOf(res: HttpResponse, req: HttpRequest, address: ClientAddress): string | undefined {
  const relayed = req.getHeader(RELAY_HEADER);
  return relayed === '' ? undefined : address.relayedPeer(relayed, () => remoteAddress(res));
}

/** `method`: the request's method in capitals when the route answers one method only (saves asking uWS). */
export function readRequest(res: HttpResponse, req: HttpRequest, paramCount: number, address: ClientAddress, trading = false, method?: string): RequestInfo {
  const headers: Record<string, string> = {};
  for (const name of HEADER_NAMES) {
    const v = req.getHeader(name);
    if (v !== '') headers[name] = v;
  }
  if (trading) {
    const keys = headerValues(req, 'idempotency-key');
    if (!allSame(keys)) throw apiError('BAD_REQUEST', "header 'Idempotency-Key' given more than once with different values");
    if (keys.length > 0 && headers['idempotency-key'] === undefined) headers['idempotency-key'] = '';
  }
  // Most routes have no path parameter: they share one empty (frozen) list.
  let params = NO_PARAMS;
  if (paramCount > 0) {
    params = [];
    for (let i = 0; i < paramCount; i++) params.push(decodePathSegment(req.getParameter(i)));
  }
  const rawQuery = queryOf(req);
  // Read only when trusted: an untrusted x-forwarded-for is never looked at. The right-most entry
  // is the address our proxy saw and appended; entries left of it came from the client and could
  // be anything (taking the left-most let a client dodge the failed-auth block).
  const forwarded = address.trustProxy ? lastEntry(req.getHeader('x-forwarded-for')) : undefined;
  if (forwarded) headers['x-forwarded-for'] = forwarded;
  // Relayed by the pipelining listener: its client's address stands for the loopback socket's.
  const peer = address.relays ? relayedPeerOf(res, req, address) : undefined;
  return new Request(res, method ?? req.getMethod().toUpperCase(), req.getUrl(), rawQuery, headers, params, forwarded || peer);
}
