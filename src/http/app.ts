// Binds route records to a uWS app: copy the request, check the throttle, authenticate, read and
// validate the body and query, run the handler, map any error to JSON in one place.
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { z } from 'zod';
import type { Authenticator, Principal } from '../auth/authenticator.js';
import { assertCanTrade } from '../auth/rights.js';
import type { KeyRateLimiter } from '../auth/keyRateLimit.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { apiError, type ApiError, toApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { NewAuditRow } from '../store/audit.js';
import { admit, noteRefusal } from './admission.js';
import type { ClientAddress } from './clientAddress.js';
import { CorsPolicy } from './cors.js';
import type { Metrics } from './metrics.js';
import { assertOneContentLength, readRequest, type RequestInfo } from './request.js';
import { QueryMemo } from './queryMemo.js';
import { type BodyLimits, readBody } from './body.js';
import { requestIdOf } from './requestId.js';
import { closesConnection, ResponseSink } from './respond.js';
import type { ActionAudit, AnyRoute } from './route.js';

export interface HttpDeps {
  auth: Authenticator;
  throttle: AuthThrottle;
  metrics: Metrics;
  log: Logger;
  /** Request body size and time limits. */
  body: BodyLimits;
  /** How client addresses are read (TRUST_PROXY, the pipelining relay's header). */
  address: ClientAddress;
  /** Access log at debug level (checked before building the record, on the hot path). */
  debugLog?: boolean;
  /** CORS allowlist (CORS_ORIGINS); undefined when empty, and then no Origin is read. */
  cors?: CorsPolicy;
  /** Per-API-key requests/s and orders/s (429 RATE_LIMITED). */
  limits?: KeyRateLimiter;
  /** The audit log of management actions (routes with `audit`). */
  audit?: AuditLog;
  /** Told when a request failed because DATA_DIR is full (its episode starts there if not already). */
  storage?: { reportFull(reason: string): void };
  /** Cluster mode: this node's id, on every response as x-tagw-node. */
  node?: string | undefined;
  /** Tracks requests in flight so shutdown can drain them. */
  inflight: { count: number; draining: boolean };
}

export interface AuditEntry { principal: Principal; action: string; target: string | null; detail: Record<string, unknown> | undefined }

export interface AuditLog {
  /** The row of a management action (who, what, on which target, when). */
  row(entry: AuditEntry): NewAuditRow;
  /** Writes the row of a successful action whose handler had none written with its change (an
   *  upgrade, a fault); the answer waits for it (in cluster mode: PostgreSQL has it, or this node's
   *  disk while PostgreSQL is away). Never rejects. */
  add(row: NewAuditRow): Promise<void>;
}

/** A request of a route with `audit`: the handler makes its row for the change's own transaction
 *  (`row`, given to TenancyWrites), else the row is added after the handler succeeded. */
class RequestAudit implements ActionAudit {
  made = false;
  constructor(private readonly log: AuditLog, private readonly principal: Principal, private readonly action: string) {}
  row(target: string | null, detail?: Record<string, unknown>, action = this.action): NewAuditRow {
    this.made = true;
    return this.log.row({ principal: this.principal, action, target, detail });
  }
  after(target: string | null): Promise<void> {
    return this.made ? Promise.resolve() : this.log.add(this.log.row({ principal: this.principal, action: this.action, target, detail: undefined }));
  }
}

const idOf = (body: unknown): string | null => {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : null;
};

export function formatZodError(where: string, err: z.ZodError): string {
  return err.issues
    .map((i) => {
      const field = i.path.length ? i.path.join('.') : where;
      return `${where === 'body' ? 'body field' : 'parameter'} '${field}': ${i.message}`;
    })
    .join('; ');
}

/**
 * The 400 for a query that failed its schema: INVALID_PARAMETER when it has parameters the route
 * does not take (`strictParams`; they are listed in `parameters`), else BAD_REQUEST naming the bad values.
 */
export function queryError(err: z.ZodError): ApiError {
  const unknown = err.issues.filter((i) => i.code === 'unrecognized_keys');
  if (unknown.length > 0) {
    const parameters = unknown.flatMap((i) => (i as { keys: string[] }).keys);
    return apiError('INVALID_PARAMETER', unknown.map((i) => i.message).join('; '), { details: { parameters } });
  }
  return apiError('BAD_REQUEST', formatZodError('query', err));
}

function paramCount(path: string): number {
  return (path.match(/\/:/g) ?? []).length;
}

export function sendError(sink: ResponseSink, e: ApiError, close = false): void {
  sink.json(e.status, e.toBody(), e.headers, close);
}

export function mountRoutes(app: TemplatedApp, routes: AnyRoute[], deps: HttpDeps): void {
  const methodsOf = allowedMethods(routes);
  for (const route of routes) {
    const n = paramCount(route.path);
    // Not for trading calls: each carries a new clientOrderId or ticket, so kept copies would only
    // live long enough to be promoted by the GC, never be hit; unless the route names the parameter
    // that varies, and the rest of its query is kept.
    const keep = !route.secretQuery && (!route.trading || route.queryVaries !== undefined);
    const memo = route.query ? new QueryMemo(route.query, { keep, varies: route.queryVaries }) : undefined;
    // Only 'any' routes (and the fallback below) see HEAD: uWS matches get() to GET alone.
    const anyMethod = route.method === 'any';
    /** The route's label in /metrics: its template, never the raw URL (ids stay out of label values). */
    const label = `${route.method.toUpperCase()} ${route.path}`;
    /** What readRequest would ask uWS for, known here for a route of one method (uWS matches get() to GET alone). */
    const fixedMethod = anyMethod ? undefined : route.method === 'delete' ? 'DELETE' : route.method.toUpperCase();
    const handler = (res: HttpResponse, req: HttpRequest) => {
      const method = anyMethod ? req.getMethod() : '';
      // uWS gives an OPTIONS to an 'any' route before the preflight handler: answered the same way.
      if (method === 'options') return preflight(res, req, deps, methodsOf);
      const sink = new ResponseSink(res, false, method === 'head');
      sink.node = deps.node;
      if (deps.cors) sink.cors = deps.cors.allows(req.getHeader('origin'));
      let info: RequestInfo;
      try {
        info = readRequest(res, req, n, deps.address, route.trading === true, fixedMethod);
        assertOneContentLength(req, info.headers['content-length']);
      } catch (err) {
        // Thrown from a uWS callback it would end the process: answered here instead.
        const e = toApiError(err);
        sendError(sink, e, closesConnection(e));
        return;
      }
      serve(route, info, sink, deps, memo, label);
    };
    switch (route.method) {
      case 'get': app.get(route.path, handler); break;
      case 'post': app.post(route.path, handler); break;
      case 'put': app.put(route.path, handler); break;
      case 'patch': app.patch(route.path, handler); break;
      case 'delete': app.del(route.path, handler); break;
      case 'any': app.any(route.path, handler); break;
    }
  }
}

/**
 * The methods each route path answers, for the fallback: a path that exists under other methods
 * is a 405 with `Allow`, not a 404 that reads as "no such endpoint". `:param` segments match any
 * one segment; 'any' routes answer every method themselves and never reach the fallback.
 */
export function methodsByPath(routes: readonly AnyRoute[]): (path: string) => string[] {
  const byPattern = new Map<string, { re: RegExp; methods: Set<string> }>();
  for (const r of routes) {
    if (r.method === 'any') continue;
    let entry = byPattern.get(r.path);
    if (!entry) {
      const re = new RegExp(`^${r.path.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}$`);
      byPattern.set(r.path, (entry = { re, methods: new Set() }));
    }
    entry.methods.add(r.method.toUpperCase());
  }
  const patterns = [...byPattern.values()];
  return (path) => {
    const out = new Set<string>();
    for (const p of patterns) if (p.re.test(path)) for (const m of p.methods) out.add(m);
    return [...out].sort();
  };
}

/** Methods an 'any' route answers, for Allow and the preflight. */
const ANY_METHODS = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT'];

/**
 * Every method a path answers; empty for a path no route has. Routes of one method win over an
 * 'any' route matching the same path, and an 'any' route that only answers errors (a catch-all
 * such as /v1/proxy/:operation, successStatus null) answers no method.
 */
export function allowedMethods(routes: readonly AnyRoute[]): (path: string) => string[] {
  const byMethod = methodsByPath(routes);
  const anyRoutes = methodsByPath(routes.filter((r) => r.method === 'any' && r.successStatus !== null).map((r) => ({ ...r, method: 'get' as const })));
  return (path) => {
    const specific = byMethod(path);
    return specific.length > 0 ? specific : anyRoutes(path).length > 0 ? ANY_METHODS : [];
  };
}

/**
 * OPTIONS on a route: 204 with Allow, plus the CORS preflight headers when the Origin is on the
 * allowlist (none otherwise: the browser then refuses the real request). An unknown path stays a 404.
 */
function preflight(res: HttpResponse, req: HttpRequest, deps: HttpDeps, methodsOf: (path: string) => string[]): void {
  const receivedAt = performance.now();
  const path = req.getUrl();
  const origin = deps.cors?.allows(req.getHeader('origin'));
  const sink = new ResponseSink(res);
  sink.cors = origin;
  sink.node = deps.node;
  const methods = methodsOf(path);
  if (methods.length === 0) {
    sendError(sink, apiError('ROUTE_NOT_FOUND', `no route for OPTIONS ${path}`));
  } else {
    const allow = [...methods, 'OPTIONS'];
    sink.cors = undefined; // the preflight headers below say it all
    sink.send(204, '', { allow: allow.join(', '), ...(origin ? CorsPolicy.preflightHeaders(origin, allow) : {}) }, 'text/plain');
  }
  deps.metrics.observe('ops', methods.length === 0 ? 404 : 204, (performance.now() - receivedAt) / 1000);
}

/** Answers OPTIONS on every route (see preflight); mounted before the not-found fallback. */
export function mountPreflight(app: TemplatedApp, deps: HttpDeps, routes: readonly AnyRoute[]): void {
  const methodsOf = allowedMethods(routes);
  app.options('/*', (res, req) => preflight(res, req, deps, methodsOf));
}

/** 405 for a path that answers only `methods` (listed in Allow); `hint` ends the message. */
export function methodNotAllowed(path: string, method: string, methods: readonly string[], hint?: string): ApiError {
  return apiError('METHOD_NOT_ALLOWED', `${path} answers ${methods.join(', ')}, not ${method}${hint ? `: ${hint}` : ''}`, { headers: { allow: methods.join(', ') } });
}

/** The fallback for every request no route matched: JSON 405 (the path exists under other methods) or 404, never uWS's empty default. */
export function mountNotFound(app: TemplatedApp, deps: HttpDeps, routes: readonly AnyRoute[] = []): void {
  const allowed = methodsByPath(routes);
  app.any('/*', (res, req) => {
    const info = readRequest(res, req, 0, deps.address);
    const sink = new ResponseSink(res, true, info.method === 'HEAD');
    sink.node = deps.node;
    if (deps.cors) sink.cors = deps.cors.allows(req.getHeader('origin'));
    sink.requestId = requestIdOf(info.headers['x-request-id']);
    const methods = allowed(info.path);
    let e = methods.length > 0 ? methodNotAllowed(info.path, info.method, methods) : apiError('ROUTE_NOT_FOUND', `no route for ${info.method} ${info.path}`);
    try {
      assertOneContentLength(req, info.headers['content-length']);
    } catch (err) {
      e = toApiError(err);
    }
    sendError(sink, e, closesConnection(e));
    deps.metrics.observe('ops', e.status, (performance.now() - info.receivedAt) / 1000, 'unmatched');
  });
}

/**
 * The route's validated query (400 on a bad one), or the split query of a route without a schema.
 * `req.query` is read only on a memo miss: the getter splits the raw string, which a hit never needs.
 */
export function validatedQuery(req: Pick<RequestInfo, 'rawQuery' | 'query'>, memo: QueryMemo | undefined): unknown {
  if (!memo) return req.query;
  // memo.parse calls back synchronously: one module-level function reads the request being
  // validated (a closure per request before).
  validating = req;
  let r;
  try {
    r = memo.parse(req.rawQuery, splitValidating);
  } finally {
    validating = undefined;
  }
  if (!r.ok) throw queryError(r.error);
  return r.data;
}
let validating: Pick<RequestInfo, 'query'> | undefined;
const splitValidating = () => validating!.query;

/**
 * Resolves once uWS has parsed everything else that came in the same read as this request. A
 * request pipelined behind one whose reply is pending makes uWS close the connection (see
 * ResponseSink.deferred), and it does so while parsing that read, after the first request's
 * handler ran: a request that changes state waits for this point and is dropped, unexecuted, if the
 * connection is gone by then, rather than executed with nobody left to tell. (A microtask is too
 * early: uWS.js drains them after each callback, before it parses the next request.)
 */
export const afterThisRead = () => new Promise<void>((resolve) => waitForRead(resolve));
/** What waits for the end of the read: a request (resumed by a method call, no promise) or a callback. */
type ReadWaiter = Exchange | (() => void);
let readWaiters: ReadWaiter[] = [];
function waitForRead(w: ReadWaiter): void {
  // One immediate for every request of the read (uWS parses them all in one poll phase): they
  // resume together, so the shard calls they make leave in one message (shardSet.ts queueFlush),
  // not the first alone and the rest a loop turn later.
  if (readWaiters.length === 0) setImmediate(releaseRead);
  readWaiters.push(w);
}
function releaseRead(): void {
  const waiters = readWaiters;
  readWaiters = [];
  for (const w of waiters) {
    if (typeof w === 'function') w();
    else w.afterRead();
  }
}

/** What changes something (trading calls, orders, GETs marked so, every method but GET and HEAD) runs only on a connection that survived its read. */
const changesState = (route: AnyRoute, req: RequestInfo) =>
  route.trading === true || route.orders === true || route.changesState === true || (req.method !== 'GET' && req.method !== 'HEAD');

/** nginx's "client closed request": the connection was gone before the request ran, so it never did. */
const CLIENT_CLOSED = 499;

type ReplyOf = Awaited<ReturnType<AnyRoute['handler']>>;

function serve(route: AnyRoute, req: RequestInfo, sink: ResponseSink, deps: HttpDeps, memo: QueryMemo | undefined, label: string): void {
  new Exchange(route, req, sink, deps, memo, label).start();
}

/**
 * One request through its route: the checks (draining, throttle, key, rate limits), the body and
 * the query, the handler, the reply or the error's JSON, then the request's metrics and log line.
 * A chain of methods rather than one async function: an async function's frame (every local of
 * the whole path) and the promise per await were the largest part of a request's garbage; here
 * only the steps that wait (a body, the handler's promise, an audit) await, in small frames, and
 * the wait for the end of the read is a method call.
 */
class Exchange {
  private status = 500;
  private principal: Principal | undefined = undefined;
  private audit: RequestAudit | undefined = undefined;
  private query: unknown = undefined;
  private body: unknown = undefined;

  constructor(
    private readonly route: AnyRoute, private readonly req: RequestInfo, private readonly sink: ResponseSink,
    private readonly deps: HttpDeps, private readonly memo: QueryMemo | undefined, private readonly label: string,
  ) {}

  start(): void {
    const { route, req, sink, deps } = this;
    sink.requestId = requestIdOf(req.headers['x-request-id']);
    deps.inflight.count++;
    let bodyPromise: Promise<Buffer> | undefined;
    try {
      // Register onData synchronously (uWS requires it before returning from the handler).
      bodyPromise = route.body ? readBody(sink, req.headers['content-length'], deps.body) : undefined;
      // Handled now: when a check below fails first (auth, throttle, draining), nothing awaits the
      // body, and its rejection (e.g. too large) must not become an unhandled rejection that ends
      // the process. Awaited further down, it still throws there.
      bodyPromise?.catch(() => undefined);
      const principal = admit(deps, req, route.auth, req.headers, req.path.startsWith('/v1/'));
      this.principal = principal;
      // SPEC §5.5: every trading call answers 403 to a read-only key, whatever its parameters.
      if (route.trading && principal) assertCanTrade(principal);
      if (principal?.kind === 'api' && deps.limits) {
        const limited = deps.limits.check(principal.keyId, route.trading === true || route.orders === true);
        if (limited) throw limited;
      }
    } catch (err) {
      this.fail(err);
      return;
    }
    if (bodyPromise) void this.withBody(bodyPromise);
    else this.validate();
  }

  private async withBody(bodyPromise: Promise<Buffer>): Promise<void> {
    try {
      const raw = await bodyPromise;
      let json: unknown = {};
      if (raw.length > 0) {
        try {
          json = JSON.parse(raw.toString('utf8'));
        } catch {
          throw apiError('INVALID_JSON', 'request body is not valid JSON');
        }
      }
      const r = this.route.body!.safeParse(json);
      if (!r.success) throw apiError('BAD_REQUEST', formatZodError('body', r.error));
      this.body = r.data;
    } catch (err) {
      this.fail(err);
      return;
    }
    this.validate();
  }

  private validate(): void {
    try {
      this.query = validatedQuery(this.req, this.memo);
      if (changesState(this.route, this.req)) {
        this.sink.deferred(); // still inside uWS's handler (or in readBody's onData): onAborted may be registered
        waitForRead(this);
        return;
      }
    } catch (err) {
      this.fail(err);
      return;
    }
    this.handle();
  }

  /** The read this request came in was parsed (see afterThisRead). */
  afterRead(): void {
    if (!this.sink.open) {
      this.status = CLIENT_CLOSED;
      this.finish();
      return;
    }
    this.handle();
  }

  private handle(): void {
    const { route, req, principal, deps } = this;
    let out;
    try {
      const audit = route.audit && principal && deps.audit ? new RequestAudit(deps.audit, principal, route.audit) : undefined;
      this.audit = audit;
      out = route.handler({ req, query: this.query, body: this.body, principal, params: req.params, audit });
      if (out instanceof Promise) this.sink.deferred(); // inside uWS's handler unless deferred above: the last moment onAborted may be registered
    } catch (err) {
      this.fail(err);
      return;
    }
    if (out instanceof Promise) this.waitFor(out);
    else this.reply(out);
  }

  /** Two closures on the handler's promise: about half the garbage of an async method awaiting it.
   *  A method of its own: closures in handle() would make V8 allocate their context at every call,
   *  for routes that answer at once too. */
  private waitFor(out: Promise<ReplyOf>): void {
    out.then((reply) => this.reply(reply), (err: unknown) => this.fail(err));
  }

  private reply(reply: ReplyOf): void {
    if (reply == null) {
      this.fail(new Error(`${this.route.path}: the handler gave no reply`));
      return;
    }
    this.status = reply.status ?? 200;
    if (this.audit) void this.audited(this.audit, reply);
    else this.send(reply);
  }

  private async audited(audit: RequestAudit, reply: ReplyOf): Promise<void> {
    try {
      await audit.after(this.req.params[0] ?? idOf(reply.body));
    } catch (err) {
      this.fail(err);
      return;
    }
    this.send(reply);
  }

  private send(reply: ReplyOf): void {
    try {
      if (reply.raw !== undefined) this.sink.send(this.status, reply.raw, reply.headers, reply.contentType ?? 'text/plain');
      else this.sink.json(this.status, reply.body, reply.headers);
    } catch (err) {
      this.fail(err);
      return;
    }
    this.finish();
  }

  /** Any error on the way: mapped to its status and JSON in one place (src/errors.ts). */
  private fail(err: unknown): void {
    const { route, sink, deps } = this;
    try {
      const e = toApiError(err);
      this.status = e.status;
      if (e.code === 'INTERNAL_ERROR' || e.code === 'TERMINAL_ERROR') {
        deps.log.error('request failed', { route: route.path, code: e.code, requestId: sink.requestId, err: e.cause ?? e });
      }
      if (e.code === 'STORAGE_UNAVAILABLE') deps.storage?.reportFull(`a write failed for lack of space (${route.path})`);
      noteRefusal(deps, this.req, e);
      sendError(sink, e, closesConnection(e));
    } finally {
      this.finish();
    }
  }

  private finish(): void {
    const { req, sink, deps } = this;
    deps.inflight.count--;
    const seconds = (performance.now() - req.receivedAt) / 1000;
    deps.metrics.observe(this.route.family, this.status, seconds, this.label);
    // Path only: query strings can carry keys (apiKey=) and are never logged.
    if (deps.debugLog) deps.log.debug('request', { method: req.method, path: req.path, status: this.status, ms: Math.round(seconds * 1e6) / 1e3, requestId: sink.requestId });
  }
}
