// Retry timing and retry decisions, pure (no clock, no I/O): the HTTP transport and the socket
// clients ask these functions and do the waiting themselves.

export interface BackoffOptions {
  /** First delay's upper bound, ms. */
  baseMs: number;
  /** No delay is longer than this, ms. */
  maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { baseMs: 100, maxMs: 5_000 };

/**
 * Delay before retry number `attempt` (0 = the first retry): "equal jitter", half of the capped
 * exponential bound plus a random half. Half is never zero, so a broken server is not hammered;
 * the random half keeps a fleet of bots that lost the gateway at the same moment from coming
 * back in lock-step.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions, random: () => number): number {
  return retryWait(attempt, opts, random, 0);
}

/**
 * The wait before retry number `attempt` when the server may have said how long (`retryAfterMs`:
 * a `retry-after`, a 429's `retryAfterMs`): the backoff, or, when retry-after is longer, retry-after
 * plus the backoff's random half. Not retry-after alone: every caller refused in the same moment
 * (a bot's concurrent orders over its key's limit, a fleet of bots told 503 retry-after by a
 * draining gateway) would otherwise come back in the same millisecond, and most be refused again.
 */
export function retryWait(attempt: number, opts: BackoffOptions, random: () => number, retryAfterMs: number): number {
  const cap = Math.min(opts.maxMs, opts.baseMs * 2 ** Math.min(Math.max(0, attempt), 30));
  const jitter = random() * (cap / 2);
  return Math.round(Math.max(cap / 2 + jitter, retryAfterMs > 0 ? retryAfterMs + jitter : 0));
}

/** What a call may do when retried: `safe` ones change nothing the second time (reads, and trades
 *  carrying a clientOrderId, which the gateway replays); `unsafe` ones could act twice. */
export type CallSafety = 'safe' | 'unsafe';

export interface Outcome {
  /** HTTP status, or 0 when no response arrived (connection refused, reset, timed out). */
  status: number;
  /** The body's `error` code, when there was one. */
  code?: string | undefined;
  /** 409 IDEMPOTENCY_UNCERTAIN's `final` field (absent: final). */
  final?: boolean | undefined;
}

/**
 * Whether to try again after `outcome`. Never 401/403 (they count toward the failed-auth block,
 * SPEC §7 rule 1), never a final 409 IDEMPOTENCY_UNCERTAIN (a retry cannot settle it: the caller
 * must look), never a 4xx the same request will get again. A 409 IDEMPOTENCY_UNCERTAIN that is not
 * final is retried: the same id again is what settles it. An unsafe call is retried only when the
 * gateway said it did nothing (429 RATE_LIMITED): after a lost connection it may have acted.
 */
export function shouldRetry(safety: CallSafety, o: Outcome): boolean {
  if (o.status === 429) return o.code !== 'AUTH_THROTTLED';
  if (o.status === 409 && o.code === 'IDEMPOTENCY_UNCERTAIN') return o.final === false;
  if (safety === 'unsafe') return false;
  if (o.status === 0) return true;
  if (o.status === 408) return true;
  return o.status >= 500 && o.status !== 501;
}

/** `retry-after` (seconds, or an HTTP date) in ms; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  if (value == null || value.trim() === '') return undefined;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}
