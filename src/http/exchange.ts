// One request through its route (Exchange): the checks, the body and the query, the handler, the
// reply or the error's JSON in one place, the audit row of a management action, then the request's
// metrics and log line. What it needs from the gateway is HttpDeps.
import type { Authenticator, Principal } from '../auth/authenticator.js';
import { assertCanTrade } from '../auth/rights.js';
import type { KeyRateLimiter } from '../auth/keyRateLimit.js';
import type { AuthThrottle } from '../auth/throttle.js';
import { apiError, toApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { NewAuditRow } from '../store/audit.js';
import { admit, noteRefusal } from './admission.js';
import { type BodyLimits, readBody } from './body.js';
import type { ClientAddress } from './clientAddress.js';
import type { CorsPolicy } from './cors.js';
import { waitForRead } from './endOfRead.js';
import type { Metrics } from './metrics.js';
import type { QueryMemo } from './queryMemo.js';
import type { RequestInfo } from './request.js';
import { requestIdOf } from './requestId.js';
import { closesConnection, type ResponseSink, sendError } from './respond.js';
import type { ActionAudit, AnyRoute } from './route.js';
import { formatZodError, validatedQuery } from './validation.js';

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
  none(): void {
    this.made = true;
  }
  after(target: string | null): Promise<void> {
    return this.made ? Promise.resolve() : this.log.add(this.log.row({ principal: this.principal, action: this.action, target, detail: undefined }));
  }
}

const idOf = (body: unknown): string | null => {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' ? id : null;
};

/** What changes something (trading calls, orders, GETs marked so, every method but GET and HEAD) runs only on a connection that survived its read. */
const changesState = (route: AnyRoute, req: RequestInfo) =>
  route.trading === true || route.orders === true || route.changesState === true || (req.method !== 'GET' && req.method !== 'HEAD');

/** nginx's "client closed request": the connection was gone before the request ran, so it never did. */
const CLIENT_CLOSED = 499;

type ReplyOf = Awaited<ReturnType<AnyRoute['handler']>>;

export function serve(route: AnyRoute, req: RequestInfo, sink: ResponseSink, deps: HttpDeps, memo: QueryMemo | undefined, label: string): void {
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
      const audit = route.audit && principal?.kind === 'management' && deps.audit ? new RequestAudit(deps.audit, principal, route.audit) : undefined;
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
      // The operator's to find: something holds the database's write lock (a sqlite3 shell, a copy tool).
      if (e.code === 'STORAGE_BUSY') deps.log.warn('request failed: the database stayed locked past its busy wait', { route: route.path, requestId: sink.requestId });
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
