// Errors are values: a code, the HTTP status it maps to, a message safe to show a client.
// The status of every code lives in ERROR_STATUS below and nowhere else (SPEC §7).
import { redactKeys } from './util/redactKeys.js';

export const ERROR_STATUS = {
  BAD_REQUEST: 400,
  TRADE_REQUEST_ERROR: 400,
  ACCOUNT_ID_REQUIRED: 400,
  /** A query parameter the route does not take, on a route that refuses unknown ones (trading
   *  routes, /v1/proxy operations, /news): a misspelt `stopLoss` must not become an order without SL. */
  INVALID_PARAMETER: 400,
  INVALID_JSON: 400,
  /** The broker refused a login/password given to /ConnectEx (not 401: that is about the API key). */
  BROKER_AUTH_FAILED: 400,
  API_KEY_REQUIRED: 401,
  INVALID_API_KEY: 401,
  MANAGEMENT_KEY_REQUIRED: 401,
  NO_SUBSCRIPTION: 402,
  READ_ONLY_KEY: 403,
  ACCOUNT_SCOPE: 403,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  /** Gateway session handle unknown, or invalidated by Disconnect. */
  SESSION_NOT_FOUND: 404,
  /** A gateway operation that exists only on the other platform generation (P4 vs P5). */
  OPERATION_NOT_ON_PLATFORM: 404,
  METHOD_NOT_ALLOWED: 405,
  IDEMPOTENCY_UNCERTAIN: 409,
  BROKER_LOGIN_IN_USE: 409,
  /** The resource is not in a state the request needs (e.g. replacing a key already revoked). */
  CONFLICT: 409,
  /** The request body did not arrive in time (config bodyTimeoutMs). */
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  IDEMPOTENCY_KEY_REUSED: 422,
  RATE_LIMITED: 429,
  AUTH_THROTTLED: 429,
  /** This key's place in the node's queue of broker logins waiting to run (ACCOUNT_CREATION_CONCURRENCY) is full:
   *  nothing was done; retry after retry-after (429, which a client retries even for a call that is
   *  not safe to repeat, since the gateway says it did nothing). */
  ACCOUNT_CREATION_BUSY: 429,
  TERMINAL_ERROR: 500,
  INTERNAL_ERROR: 500,
  NOT_ON_THIS_TERMINAL: 501,
  NOT_CONNECTED: 503,
  SERVICE_UNAVAILABLE: 503,
  /** DATA_DIR's file system is full (src/store/storageHealth.ts): nothing could be recorded, so nothing was sent. */
  STORAGE_UNAVAILABLE: 503,
  /** DATA_DIR's database stayed locked by another writer past its busy wait (SQLITE_BUSY): nothing of the failed write was kept. */
  STORAGE_BUSY: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content',
  400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found',
  405: 'Method Not Allowed', 408: 'Request Timeout', 409: 'Conflict', 413: 'Payload Too Large', 415: 'Unsupported Media Type',
  422: 'Unprocessable Entity', 429: 'Too Many Requests', 500: 'Internal Server Error',
  501: 'Not Implemented', 503: 'Service Unavailable',
};

export interface ApiErrorOptions {
  cause?: unknown;
  /** Extra response headers, e.g. retry-after. */
  headers?: Record<string, string>;
  /** Extra JSON fields beside error/message (never secrets). */
  details?: Record<string, unknown>;
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly headers: Record<string, string> | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, opts: ApiErrorOptions = {}) {
    // A message may name what the request held (a path, a parameter's value): a key's value pasted
    // there by mistake is not shown back with its secret.
    super(redactKeys(message), opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'ApiError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.headers = opts.headers;
    this.details = opts.details;
  }

  toBody(): Record<string, unknown> {
    return { error: this.code, message: this.message, ...this.details };
  }
}

export function apiError(code: ErrorCode, message: string, opts?: ApiErrorOptions): ApiError {
  return new ApiError(code, message, opts);
}

/** The broker turned a login down: worded once, so a refusal from the broker, from a stored
 *  password and from another node's holder read the same (the answer must not tell them apart). */
export function brokerRefused(): ApiError {
  return apiError('BROKER_AUTH_FAILED', 'the broker refused this login and password');
}

/** Whether an error is a write that failed for lack of space: SQLite's SQLITE_FULL, or ENOSPC/EDQUOT from the file system. */
export function isStorageFull(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || code === 'EDQUOT';
}

/** Whether an error is SQLite giving up on a lock another connection held past busy_timeout
 *  (SQLITE_BUSY and its extended codes; SQLITE_LOCKED alike): the statement's transaction was rolled back. */
export function isStorageBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)/.test(code);
}

// A PostgreSQL that is not there, going away or not accepting yet (cluster mode): SQLSTATE class 08
// (connection exception), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now; the
// socket failing under node-postgres; and node-postgres' own words for a connection that never came
// or broke (pg/lib/client.js, pg-pool). A bare socket code reaches this mapping only from the
// cluster's PostgreSQL: broker and NATS failures are mapped where they happen.
const DB_GONE_STATE = /^(08[0-9A-Z]{3}|57P0[123])$/;
const SOCKET_FAILURE: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED', 'EAI_AGAIN']);
const PG_CONNECTION_LOST = /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed and is not queryable)/;

/** Whether an error is the cluster database being unreachable (down, restarting, cut off), not a
 *  fault of the request or the code. Follows `cause` and an AggregateError's `errors` (a host name
 *  with several addresses fails with one error per address). */
export function isDatabaseUnreachable(err: unknown, depth = 0): boolean {
  if (depth > 4 || typeof err !== 'object' || err === null) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string' && (DB_GONE_STATE.test(e.code) || SOCKET_FAILURE.has(e.code))) return true;
  if (err instanceof Error && PG_CONNECTION_LOST.test(err.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((x) => isDatabaseUnreachable(x, depth + 1))) return true;
  return isDatabaseUnreachable(e.cause, depth + 1);
}

/** Anything thrown that is not an ApiError is an internal fault: its text is logged, never shown.
 *  Except a full disk, which the operator can fix and the client can retry after: 503; the
 *  database locked past its busy wait (another process holding DATA_DIR's write lock): 503; and the
 *  cluster database unreachable, answered as the cluster answers its messaging (NATS) being down:
 *  503 with retry-after, its message naming no server, user or password. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (isStorageFull(err)) {
    return new ApiError('STORAGE_UNAVAILABLE', "the gateway's disk (DATA_DIR) is full: the request could not be recorded, so it was not carried out; retry once the operator has freed space", {
      cause: err, headers: { 'retry-after': '5' },
    });
  }
  if (isStorageBusy(err)) {
    return new ApiError('STORAGE_BUSY', "the gateway's database (DATA_DIR) stayed locked by another writer for too long: the request's write was not kept; retry shortly", {
      cause: err, headers: { 'retry-after': '1' },
    });
  }
  if (isDatabaseUnreachable(err)) {
    return new ApiError('SERVICE_UNAVAILABLE', "the cluster's database (PostgreSQL) cannot be reached from this node; retry once it is back", {
      cause: err, headers: { 'retry-after': '1' },
    });
  }
  return new ApiError('INTERNAL_ERROR', 'internal error', { cause: err });
}

/** Error as it crosses a thread boundary (structured clone drops class identity). */
export interface WireError {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export function toWire(err: unknown): WireError {
  const e = toApiError(err);
  const w: WireError = { code: e.code, message: e.message };
  if (e.details) w.details = e.details;
  if (e.headers) w.headers = e.headers;
  return w;
}

export function fromWire(w: WireError): ApiError {
  const opts: ApiErrorOptions = {};
  if (w.details) opts.details = w.details;
  if (w.headers) opts.headers = w.headers;
  return new ApiError(w.code, w.message, opts);
}
