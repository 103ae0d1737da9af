// One error class for everything the gateway (or the network) refused, and one subclass for the
// answer a bot must handle by itself: 409 IDEMPOTENCY_UNCERTAIN.
import type { ErrorCode } from '../errors.js';
import type { RejectReason } from '../market/orders.js';

export type { ErrorCode, RejectReason };

/** Codes the SDK gives itself: no answer (NETWORK_ERROR, TIMEOUT, ABORTED: `status` 0), an answer it
 *  does not follow (REDIRECT), a socket that could not open or was closed for a revoked key, and
 *  HTTP_<status> for an answer without a JSON `error` (a proxy's 502 page, say). */
export type ClientErrorCode = 'NETWORK_ERROR' | 'TIMEOUT' | 'ABORTED' | 'REDIRECT' | 'WEBSOCKET_ERROR' | 'NO_WEBSOCKET' | 'KEY_REVOKED' | `HTTP_${number}`;
/** Every `TagwError.code`: the gateway's (src/errors.ts, the one table its errors come from) and the SDK's own. */
export type TagwErrorCode = ErrorCode | ClientErrorCode;

export interface TagwErrorInit {
  code: TagwErrorCode;
  status: number;
  message: string;
  /** ms to wait before trying again, from `retry-after`. */
  retryAfter?: number | undefined;
  requestId?: string | undefined;
  /** The error body as the gateway sent it (broker `reason`, `retcode`, ...). */
  body?: Record<string, unknown> | undefined;
  /** The trading call's clientOrderId (yours, or the one the SDK made for it). */
  clientOrderId?: string | undefined;
  /** The answer carried `Idempotent-Replay: true`. */
  replayed?: boolean | undefined;
  cause?: unknown;
}

/** `code` is the body's `error` (e.g. BAD_REQUEST, TRADE_REQUEST_ERROR), or NETWORK_ERROR /
 *  TIMEOUT with `status` 0 when no answer arrived. */
export class TagwError extends Error {
  readonly code: TagwErrorCode;
  readonly status: number;
  /** A broker rejection (TRADE_REQUEST_ERROR): why (MARKET_CLOSED, REQUOTE, NO_MONEY, ...), final
   *  and replayed for the same clientOrderId; a corrected order needs a new id. */
  readonly reason: RejectReason | undefined;
  /** ...and its MT5-style trade server return code (10018 market closed, ...). */
  readonly retcode: number | undefined;
  readonly retryAfter: number | undefined;
  readonly requestId: string | undefined;
  readonly body: Record<string, unknown> | undefined;
  /** A trading call's clientOrderId, the SDK's own when you gave none: after a TIMEOUT or a
   *  NETWORK_ERROR the order may have been placed, and sending it again with this id is safe (the
   *  gateway replays the first result); with a new id it could be placed twice. */
  readonly clientOrderId: string | undefined;
  /** The gateway answered from its record of an earlier request with this clientOrderId
   *  (`Idempotent-Replay: true`): a broker rejection is final and replayed for its id, so this one
   *  is the first attempt's (its market, its prices), not a new judgement. False otherwise. */
  readonly replayed: boolean;

  constructor(init: TagwErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = 'TagwError';
    this.code = init.code;
    this.status = init.status;
    this.retryAfter = init.retryAfter;
    this.requestId = init.requestId;
    this.body = init.body;
    this.clientOrderId = init.clientOrderId;
    this.replayed = init.replayed === true;
    this.reason = typeof init.body?.reason === 'string' ? (init.body.reason as RejectReason) : undefined;
    this.retcode = typeof init.body?.retcode === 'number' ? init.body.retcode : undefined;
  }
}

/**
 * 409 IDEMPOTENCY_UNCERTAIN: an earlier attempt with this clientOrderId was sent to the broker and
 * its answer was lost. `final` (the usual kind): the gateway cannot say whether the order exists,
 * and the same id answers 409 for as long as its record lives; a new id could place a second order.
 * Not `final`: the order was at the broker when the gateway restarted, or its reply was lost after it
 * was sent, and the broker could not be asked this time; the SDK sends
 * the same request again after `retryAfter` (as for a 503), so a bot sees this kind only once its
 * tries are used up. What to do is in `nextStep`.
 */
export class IdempotencyUncertainError extends TagwError {
  readonly final: boolean;
  readonly nextStep: string;

  constructor(init: TagwErrorInit) {
    super(init);
    this.name = 'IdempotencyUncertainError';
    // A gateway before the field was added sent the final kind only with a message; absent = final.
    this.final = init.body?.final !== false;
    this.nextStep = this.final
      ? 'Look for the order before sending another: read /OpenedOrders (and /OrderHistory for one already filled and closed), '
        + 'matching your magic number and comment. Found: it was placed, do not resend. Not found: send it again with a NEW clientOrderId.'
      : 'Send the same request again (the same clientOrderId) after retryAfter ms: the gateway then answers what the broker did with it. '
        + 'Do not use a new id: the first may have been placed.';
  }
}

export function isTagwError(e: unknown): e is TagwError {
  return e instanceof TagwError;
}

/** A socket that could not be opened at all (see SocketHooks.failed), as the error its stream ends with. */
export function socketError(e: unknown, withHeaders: boolean): TagwError {
  if (e instanceof TagwError) return e;
  // A browser's WebSocket inside a Node-like runtime (Electron, jsdom) takes no headers.
  const hint = withHeaders ? "; if this WebSocket takes no { headers } (a browser's), use new TagwClient({ webSocketKey: 'query' })" : '';
  return new TagwError({ code: 'WEBSOCKET_ERROR', status: 0, message: `the WebSocket could not be opened: ${(e as Error)?.message ?? String(e)}${hint}`, cause: e });
}

/** A refusal that trying again cannot change (bad key, scope, unknown account or handle): a
 *  reconnecting socket stops on it rather than hammering the gateway (401s count toward its
 *  failed-auth block). */
export function isFinalRefusal(e: unknown): e is TagwError {
  return e instanceof TagwError && e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429;
}

/** What a socket does after its upgrade was refused: stop with the error, or try again (not before
 *  `retryAfterMs`, when the refusal said how long: a 429 AUTH_THROTTLED blocks the IP for minutes). */
export type ClosedVerdict = 'retry' | 'stop' | { retryAfterMs: number };

/** Runs `probe` (an HTTP call with the socket's key): its error if it is final, else how long it
 *  asked to wait, if it did. */
export async function refusalOf(probe: () => Promise<unknown>): Promise<{ final?: TagwError; retryAfterMs?: number }> {
  try {
    await probe();
  } catch (e) {
    if (isFinalRefusal(e)) return { final: e };
    if (e instanceof TagwError && e.retryAfter !== undefined) return { retryAfterMs: e.retryAfter };
  }
  return {};
}
