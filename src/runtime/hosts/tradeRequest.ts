// A trade request on its way to the broker (SPEC §3, §8): its arguments read with their schema, the
// canonical form its idempotency hash covers, the broker call, and the answer stored and replayed.
import { hash as digest } from 'node:crypto';
import type { z } from 'zod';
import { NotSentError, type StoredResult } from '../../../actors/idempotency.js';
import { dialectOf } from '../../broker/dialect.js';
import type { AtomicClaim, BrokerConnection, TradeOptions } from '../../broker/types.js';
import { apiError } from '../../errors.js';
import { BrokerDisconnectedError, BrokerTimeoutError } from '../../market/brokerErrors.js';
import { isStopLimitType, type TradeResult } from '../../market/orders.js';
import { quickOrderSend, TRADE_SCHEMAS, type TradeOp } from '../../market/orderSchemas.js';
import type { AccountEntry, Lease } from './accountEntry.js';
import type { TradeReply } from './accountCommands.js';
import { assertAvailable } from './accountOps.js';
import { filledAnswerJson } from './answerJson.js';
import { JsonText } from '../../util/jsonText.js';

/** A broker call ready to run, and the canonical form of its parameters (what the hash covers). */
export interface Prepared {
  canonical: unknown;
  run(conn: BrokerConnection, opts: TradeOptions): Promise<TradeResult>;
}

/** A trade request's arguments, read with its schema (src/market/orderSchemas.ts); a bad one is a 400 naming the parameters. */
function parseArgs<O extends TradeOp>(op: O, a: Record<string, unknown>): z.output<(typeof TRADE_SCHEMAS)[O]> {
  const quick = op === 'OrderSend' ? quickOrderSend(a) : undefined;
  if (quick !== undefined) return quick as z.output<(typeof TRADE_SCHEMAS)[O]>;
  const r = TRADE_SCHEMAS[op].safeParse(a);
  if (!r.success) throw apiError('BAD_REQUEST', r.error.issues.map((i) => `parameter '${i.path.join('.') || op}': ${i.message}`).join('; '));
  return r.data as z.output<(typeof TRADE_SCHEMAS)[O]>;
}

/** The broker call of each trade operation, given its request as its schema reads it. */
type Run<O extends TradeOp> = (c: BrokerConnection, req: z.output<(typeof TRADE_SCHEMAS)[O]>, o: TradeOptions) => Promise<TradeResult>;
const RUN: { [O in TradeOp]: Run<O> } = {
  OrderSend: (c, req, o) => c.orderSend(req, o),
  OrderModify: (c, req, o) => c.orderModify(req, o),
  OrderClose: (c, req, o) => c.orderClose(req, o),
  OrderDelete: (c, req, o) => c.orderDelete(req, o),
  OrderCloseBy: (c, req, o) => c.orderCloseBy(req, o),
};

/** Reads a trade request. Platform rules are checked here, before anything is recorded or sent. */
export function prepare<O extends TradeOp>(op: O, a: Record<string, unknown>, entry: { platform: AccountEntry['platform']; build: number }): Prepared {
  assertAvailable(op, entry.platform, entry.build);
  const req = parseArgs(op, a);
  if ('type' in req && isStopLimitType(req.type) && !dialectOf(entry.platform).stopLimitOrders) {
    throw apiError('BAD_REQUEST', `${req.type} orders do not exist on ${entry.platform} (no stop-limit orders)`);
  }
  return new PreparedTrade(op, req);
}

/** One object per request (not a literal with a closure over the request and its runner). */
class PreparedTrade<O extends TradeOp> implements Prepared {
  constructor(private readonly op: O, readonly canonical: z.output<(typeof TRADE_SCHEMAS)[O]>) {}
  run(conn: BrokerConnection, opts: TradeOptions): Promise<TradeResult> {
    return (RUN[this.op] as Run<O>)(conn, this.canonical, opts);
  }
}

export function paramsHash(op: TradeOp, canonical: unknown): string {
  const o = canonical as Record<string, unknown>;
  // A market order's keys (symbol, type, volume; stoploss, takeprofit) are in order already: the
  // plain object is then its own sorted copy (same keys, same order), and building one was most of
  // the hash's cost. Checked over for-in (a plain object's own keys), with no key list made.
  let inOrder = Object.getPrototypeOf(o) === Object.prototype;
  let prev: string | undefined;
  for (const k in o) {
    if (!inOrder) break;
    if (prev !== undefined && !(prev < k)) inOrder = false;
    prev = k;
  }
  let text: string | undefined;
  if (inOrder) {
    // JSON.stringify([op, o]), written into the reused buffer (no array, no stringifier parts).
    const w = hashText.begin().raw('[').str(op).raw(',').obj(o).raw(']');
    if (!w.failed) text = w.text();
  }
  const sorted = inOrder ? o : Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  // One-shot hash (no Hash object per order); the same digest as createHash, so stored records still match.
  return digest('sha256', text ?? JSON.stringify([op, sorted]), 'base64url');
}
/** The hashed text's writer: one at a time. */
const hashText = new JsonText();

/** The answer to a trade: fills and broker rejections are both final (and replayed). Made once
 *  per result: an atomic booking makes it inside its transaction, and `execute` hands back the
 *  result, not an answer, so nothing is made twice (a WeakMap of answers cost more than it saved). */
export function answer(r: TradeResult): StoredResult {
  if (r.ok) return { status: 200, json: filledAnswerJson(r.order, r.retcode, r.deals) };
  return { status: 400, json: JSON.stringify({ error: 'TRADE_REQUEST_ERROR', message: r.message, reason: r.reason, retcode: r.retcode }) };
}

/**
 * The request id the broker dedups on. It is unique per idempotency record, not just the
 * clientOrderId: the broker keeps ids per broker login, and one login may be bound to several
 * accounts, or reuse a clientOrderId after its record expired; either must be a new order.
 */
export function brokerRequestId(accountId: string, clientOrderId: string, expiresAt: number): string {
  return `${accountId}/${clientOrderId}/${expiresAt.toString(36)}`;
}

/**
 * Sends once and settles the outcome: the broker's result (its `answer` is the caller's to make). A
 * reply lost after the send is checked with lookupRequest (by the record's broker request id); if
 * the broker cannot say, the outcome is uncertain.
 */
export async function execute(prep: Prepared, lease: Lease, requestId: string, claim?: AtomicClaim): Promise<TradeResult> {
  try {
    return await prep.run(lease.conn, claim ? { requestId, claim } : { requestId });
  } catch (err) {
    return await sendFailed(err, lease, requestId);
  } finally {
    lease.release();
  }
}

/** Sent, its reply lost, and the broker could not be asked about it (its lookup failed): not known
 *  to be lost, only not known yet. The record is left as a restart leaves one (TradeDesk). */
export class NotAskedError extends Error {
  constructor(override readonly cause: unknown) {
    super('broker reply lost after send, and the broker cannot be asked about it now');
  }
}

/** What `execute` makes of a failed send (the lease still held): not sent (NotSentError), the
 *  result the broker looked up after a lost reply, not asked (NotAskedError: the lookup failed), or
 *  the failure itself (thrown: the broker does not know the request). */
export async function sendFailed(err: unknown, lease: Lease, requestId: string): Promise<TradeResult> {
  if (err instanceof BrokerDisconnectedError || (err instanceof BrokerTimeoutError && !err.sent)) throw new NotSentError(err.message);
  if (err instanceof BrokerTimeoutError) {
    let found: Awaited<ReturnType<typeof lease.conn.lookupRequest>>;
    try {
      found = await lease.conn.lookupRequest(requestId);
    } catch (lookupErr) {
      throw new NotAskedError(lookupErr);
    }
    if (found) return found.result;
  }
  throw err;
}


export const CLIENT_ORDER_ID = /^[A-Za-z0-9_.:-]{1,64}$/;

/** A clientOrderId the gateway accepts, checked before anything is claimed or sent. */
export function assertClientOrderId(clientOrderId: string): void {
  if (!CLIENT_ORDER_ID.test(clientOrderId)) {
    throw apiError('BAD_REQUEST', 'clientOrderId / Idempotency-Key must be 1 to 64 characters from A-Z a-z 0-9 _ . : -');
  }
}

/** 409 for this attempt only (`final: false`): an earlier request with the id is at the broker, which
 *  cannot be asked about it now; the same request again after retryAfterMs gets the real answer. */
export const uncertainForNowError = (message: string) =>
  apiError('IDEMPOTENCY_UNCERTAIN', message, { details: { final: false, retryAfterMs: 1_000 }, headers: { 'retry-after': '1' } });
/** The claiming request of a lost reply the broker could not be asked about: 500 as any lost reply
 *  (SPEC §7 keeps 409 for the retries), saying what the retries get. */
export const notAskedError = () => apiError('TERMINAL_ERROR', 'the order was sent and its reply lost, and the broker cannot be asked about it now: send this request again with the same clientOrderId (never a new one): it answers the order\'s result once the broker can be asked, 409 IDEMPOTENCY_UNCERTAIN (final: false) until then', {
  headers: { 'retry-after': '1' },
});
export const notSentError = () => apiError('NOT_CONNECTED', 'the order was not sent: the account connection dropped; retry', { headers: { 'retry-after': '1' } });
export const lostError = () => apiError('TERMINAL_ERROR', 'the order was sent but its outcome is unknown (reply lost): check /OpenedOrders; retrying this clientOrderId answers 409');
/** Cluster mode's lost reply: a retry (on whichever node owns the account then) asks the broker by
 *  the record's request id, so it replays the order's answer once the broker has it (docs/cluster.md). */
export const lostElsewhereError = () => apiError('TERMINAL_ERROR', 'the order was sent but its outcome is unknown (reply lost): check /OpenedOrders; retrying this clientOrderId asks the broker again: its answer once the broker knows the order, 409 while it does not');

/**
 * What the broker did with the order sent under `requestId` (cluster mode: a record an earlier owner
 * claimed and never settled, it died mid-call): its answer, as the first reply would have been, or
 * null if the broker does not know it (it may still be in transit: the caller keeps it uncertain).
 */
export async function lookedUpElsewhere(entry: AccountEntry, requestId: string): Promise<TradeReply | null> {
  const lease = await entry.acquire();
  try {
    const found = await lease.conn.lookupRequest(requestId);
    if (!found) return null;
    const a = answer(found.result);
    return { status: a.status, json: a.json, replay: false };
  } finally {
    lease.release();
  }
}

/**
 * A trade whose idempotency record is kept outside the shard (cluster mode: the ledger in PostgreSQL
 * claimed it, fenced, before this call, writes its outcome after, and answers retries with the id,
 * keeping them from this call while it is out): no record here, no hash. It goes with the record's
 * broker request id, so a lost reply is looked up as a recorded one's is, and it fails as one does:
 * not sent (NOT_CONNECTED, the claim is freed) or sent with its outcome unknown (TERMINAL_ERROR).
 */
export async function tradeRecordedElsewhere(entry: AccountEntry, op: TradeOp, args: Record<string, unknown>, requestId: string): Promise<TradeReply> {
  const prep = prepare(op, args, entry);
  const lease = await entry.acquire();
  let result: TradeResult;
  try {
    result = await execute(prep, lease, requestId);
  } catch (err) {
    throw err instanceof NotSentError ? notSentError() : lostElsewhereError();
  }
  const a = answer(result);
  return { status: a.status, json: a.json, replay: false };
}
