// Trading with idempotency (SPEC §3 Idempotency record, §7 409/422, §8), inside the account's
// shard. All requests of an account run on this one thread, so "look up the record, else claim
// the id" happens with no await in between and needs no lock: two concurrent requests with the
// same id find each other here, and the second one waits for the first one's result.
import { NotSentError } from '../../../actors/idempotency.js';
import type { BrokerConnection } from '../../broker/types.js';
import type { RequestLookup, TradeResult } from '../../market/orders.js';
import { apiError } from '../../errors.js';
import type { TradeReply } from './accountCommands.js';
import type { TradeOp } from '../../market/orderSchemas.js';
import type { AccountEntry, Lease } from './accountEntry.js';
import { brokerFailure } from '../brokerFailures.js';
import { answer, assertClientOrderId, brokerRequestId, execute, NotAskedError, notSentError, paramsHash, prepare, sendFailed, uncertainForNowError, type Prepared } from './tradeRequest.js';
import { HeldOutcome, RecordClaim, RecordExistsError, replyOf, stoppedError, tradeReply, UnclaimedError, type Outcome, type RecordEvent } from './recordClaim.js';
import { TradeRecords, type IdemSnapshot, type Rec } from './tradeRecords.js';

export { answer, brokerRequestId, CLIENT_ORDER_ID, paramsHash, prepare } from './tradeRequest.js';

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/**
 * What the broker's answer about a record restored `sent` means. Found: it executed, and its result
 * is the record's. Not found by a broker in another process (a bridge): it may still be in transit
 * after our crash, so the record is uncertain (409, nothing sent again). Not found by a broker in
 * this process (the embedded simulator, which journals executions in our database and died with
 * us): it never executed and never will, so the id is freed (`notExecuted`) and a retry sends the order,
 * instead of 24 h of 409 for an order that certainly does not exist.
 */
export function recoveredOutcome(found: RequestLookup | null, brokerInProcess: boolean): RecordEvent {
  if (found) return { type: 'done', result: answer(found.result) };
  return brokerInProcess ? { type: 'notExecuted' } : { type: 'lost' };
}

// The two 409 IDEMPOTENCY_UNCERTAIN told apart by what a bot can act on: `final` (the same id answers
// this for as long as its record lives: look for the order, then use a new id) or not (the broker
// could not be asked this time: the same request again after retryAfterMs gets the real answer).
const UNCERTAIN_FINAL = { details: { final: true } } as const;

/** The trade path over the records: a request with a new id claimed and sent (the usual order
 *  claimed and booked atomically, with no async function of its own), one with a known id answered
 *  from its record. */
export class TradeDesk extends TradeRecords {
  /** Answers from an existing record, waiting for it if its send is still in flight. */
  private async existing(rec: Rec, hash: string, entry: AccountEntry): Promise<TradeReply | undefined> {
    if (rec.actor.getSnapshot().context.paramsHash !== hash) {
      throw apiError('IDEMPOTENCY_KEY_REUSED', 'this clientOrderId was already used with different order parameters; nothing was sent');
    }
    let s = await this.settled(rec);
    if (s.matches('recovering')) s = await this.recover(rec, entry);
    this.evict(rec);
    if (s.matches('result')) return tradeReply(s.context.result!, true);
    if (s.matches('uncertain')) {
      throw apiError('IDEMPOTENCY_UNCERTAIN', 'the outcome of an earlier request with this clientOrderId is unknown (its reply was lost after it was sent): check /OpenedOrders and /OrderHistory, then use a new id', UNCERTAIN_FINAL);
    }
    return undefined; // discarded (never sent) or expired: the id is free again
  }

  /**
   * A record restored in `sent` (the process stopped while its order was at the broker, or before
   * its outcome was written): asks the broker what it did with the record's request id. Executed:
   * the broker's result, replayed like the first answer. Unknown to the broker: see
   * `recoveredOutcome`. No answer now: still recovering, 409 for this attempt only.
   */
  private async recover(rec: Rec, entry: AccountEntry): Promise<IdemSnapshot> {
    const c = rec.actor.getSnapshot().context;
    rec.busy = true;
    try {
      let found: Awaited<ReturnType<BrokerConnection['lookupRequest']>>;
      let inProcess = false;
      try {
        const lease = await entry.acquire();
        try {
          inProcess = lease.conn.inProcess === true;
          found = await lease.conn.lookupRequest(brokerRequestId(c.accountId, c.clientOrderId, c.expiresAt));
        } finally {
          lease.release();
        }
      } catch (err) {
        this.log.warn('cannot ask the broker about an order whose outcome is unknown (sent before a restart, or its reply lost)', { err });
        throw uncertainForNowError('the outcome of an earlier request with this clientOrderId is not known yet (it was at the broker when the gateway restarted or its reply was lost, and the broker cannot be asked now): retry this request shortly');
      }
      if (rec.actor.getSnapshot().matches('recovering')) rec.actor.send(recoveredOutcome(found, inProcess));
    } finally {
      this.idle(rec);
    }
    return this.settled(rec);
  }

  /** A trade request. The usual order (a new id, a usable connection, a broker that claims atomically)
   *  is claimed and booked at once and answered by one continuation, with no async function of its own
   *  (~0.4 KB of young garbage an order, issue 19); anything else, and a claim that did not happen,
   *  goes through `tradeRecorded`, which waits for whatever it must. */
  trade(entry: AccountEntry, op: TradeOp, args: Record<string, unknown>, clientOrderId: string | undefined): Promise<TradeReply> {
    try {
      const prep = prepare(op, args, entry);
      if (clientOrderId === undefined) return this.tradeUnrecorded(entry, prep);
      assertClientOrderId(clientOrderId);
      const hash = paramsHash(op, prep.canonical);
      const k = this.key(entry.accountId, clientOrderId);
      const lease = this.records.has(k) ? undefined : entry.tryAcquire();
      if (lease?.conn.claimsAtomically !== true) return this.tradeRecorded(entry, prep, hash, k, clientOrderId, lease);
      const rec = this.newRecord(entry, hash, k, clientOrderId);
      return this.sendAtomically(rec, prep, lease).then(replyOf, (err: unknown) => {
        this.unclaimed(err, rec, k, entry.accountId, clientOrderId);
        return this.tradeRecorded(entry, prep, hash, k, clientOrderId, undefined);
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async tradeUnrecorded(entry: AccountEntry, prep: Prepared): Promise<TradeReply> {
    const lease = entry.tryAcquire() ?? (await entry.acquire());
    try {
      return tradeReply(answer(await prep.run(lease.conn, {})), false);
    } catch (err) {
      throw brokerFailure(err, 'trade');
    } finally {
      lease.release();
    }
  }

  /** A fresh record claiming the id, not yet sent. */
  private newRecord(entry: AccountEntry, hash: string, k: string, clientOrderId: string): Rec {
    return this.startFresh(k, { accountId: entry.accountId, clientOrderId, paramsHash: hash, expiresAt: this.clock.now() + IDEMPOTENCY_TTL_MS });
  }

  /** An atomic send failed: anything but an UnclaimedError is thrown on. Never claimed, nothing
   *  executed: the id has a settled row (back as an actor: returns, the caller looks again), or the
   *  order could not go out (thrown). Same-id waiters find the record gone and start over. */
  private unclaimed(err: unknown, rec: Rec, k: string, accountId: string, clientOrderId: string): void {
    if (!(err instanceof UnclaimedError)) throw err;
    if (this.records.get(k) === rec) this.records.delete(k);
    rec.evicted = true;
    rec.actor.stop();
    this.idle(rec);
    if (this.restoreSettled(accountId, clientOrderId)) return;
    if (err.cause instanceof NotSentError) throw notSentError();
    throw err.cause;
  }

  /** An idempotent trade, from its record if the id has one (waiting for its send, if in flight),
   *  else claimed and sent. `held`: a lease already taken for it. */
  private async tradeRecorded(entry: AccountEntry, prep: Prepared, hash: string, k: string, clientOrderId: string, held: Lease | undefined): Promise<TradeReply> {
    for (;;) {
      const found = this.records.get(k);
      if (found) {
        held?.release();
        held = undefined;
        const r = await this.existing(found, hash, entry);
        if (r) return r;
        if (this.records.get(k) === found) this.records.delete(k);
        continue;
      }
      const lease = held ?? entry.tryAcquire() ?? (await entry.acquire());
      held = undefined;
      // An await above may have let other requests run: one may have claimed the id meanwhile.
      if (this.records.has(k)) {
        lease.release();
        continue;
      }
      const rec = this.newRecord(entry, hash, k, clientOrderId);
      let ev: Outcome;
      if (lease.conn.claimsAtomically === true) {
        try {
          ev = await this.sendAtomically(rec, prep, lease);
        } catch (err) {
          this.unclaimed(err, rec, k, entry.accountId, clientOrderId);
          continue;
        }
      } else {
        // `send` runs persistSent synchronously: once it returns with the record in `sent`, the
        // record is committed and the order may go to the broker.
        rec.actor.send({ type: 'send' });
        const claimed = rec.actor.getSnapshot();
        if (claimed.status !== 'active' || !claimed.matches('sent')) {
          lease.release();
          if (this.records.get(k) === rec) this.records.delete(k);
          if (claimed.status === 'error' && claimed.error instanceof RecordExistsError) {
            this.restoreSettled(entry.accountId, clientOrderId);
            continue;
          }
          throw claimed.status === 'error' ? claimed.error : stoppedError();
        }
        rec.busy = true;
        const outcome = new Promise<Outcome>((resolve, reject) => {
          rec.reply = { resolve, reject };
        });
        execute(prep, lease, brokerRequestId(entry.accountId, clientOrderId, rec.actor.getSnapshot().context.expiresAt)).then(answer).then(
          (result) => this.outcome(rec, { type: 'done', result }),
          (err: unknown) => (err instanceof NotAskedError ? this.leaveForRecovery(rec, err) : this.outcome(rec, err instanceof NotSentError ? { type: 'failed' } : { type: 'lost' }, err)),
        );
        ev = await outcome;
      }
      return replyOf(ev);
    }
  }

  /**
   * A broker booking in our database (claimsAtomically): the claim (`send`, its 'sent' row) runs
   * inside the transaction that books the order: one commit, and a crash leaves both or neither
   * (neither: never executed, the simulator died with us). A failure after the claim is `lost`,
   * kept in memory (its row may have gone with a failed commit) so a retry answers 409.
   */
  private sendAtomically(rec: Rec, prep: Prepared, lease: Lease): Promise<Outcome> {
    const c = rec.actor.getSnapshot().context;
    const requestId = brokerRequestId(c.accountId, c.clientOrderId, c.expiresAt);
    rec.busy = true;
    const claim = new RecordClaim(this.store, rec.actor, c);
    // Settled by `outcome`, or by halt() while the booking is awaited: both run on this thread
    // before the booking's continuation goes on, so a held value serves where a promise cost ~0.4 KB.
    const held = new HeldOutcome();
    rec.reply = held;
    // execute(), written out as continuations (no async function an order): the lease is released
    // once the send, and any lookup after a lost reply, are over.
    let sent: Promise<TradeResult>;
    try {
      sent = prep.run(lease.conn, { requestId, claim });
    } catch (err) {
      sent = Promise.reject(err);
    }
    const booked = (result: TradeResult): Outcome => {
      lease.release();
      return this.booked(rec, held, claim, result);
    };
    return sent.then(booked, (err: unknown) =>
      sendFailed(err, lease, requestId).then(booked, (e: unknown) => {
        lease.release();
        return this.notBooked(rec, held, claim, e);
      }),
    );
  }

  /** The atomic send's result: the claim's outcome (settled in the booking's transaction, or now). */
  private booked(rec: Rec, held: HeldOutcome, claim: RecordClaim, result: TradeResult): Outcome {
    try {
      const s = rec.actor.getSnapshot();
      if (s.matches('result')) {
        // Settled in the booking's transaction: answered now, with the stored bytes.
        rec.reply = undefined;
        this.idle(rec);
        this.evict(rec);
        return { type: 'done', result: s.context.result! };
      }
      this.outcome(rec, { type: 'done', result: answer(result) });
    } catch (err) {
      return this.notBooked(rec, held, claim, err);
    }
    return held.take();
  }

  /**
   * Sent, its reply lost, and the broker could not be asked (NotAskedError): the record is left as a
   * restart leaves one, its row `sent`, and let go from memory. The next request with its id restores
   * it `recovering` from the row (its claim finds the row) and asks the broker then: the order's
   * result once it can, 409 `final: false` while it cannot (`recover`). Before, such a record was
   * `uncertain`: 409 `final: true` for 24 h for an order the broker could have told about a moment later.
   */
  private leaveForRecovery(rec: Rec, err: NotAskedError): void {
    const reply = rec.reply;
    rec.reply = undefined;
    this.log.warn('order outcome not known yet: reply lost after send, and the broker cannot be asked now', { err: err.cause });
    if (this.records.get(rec.key) === rec) this.records.delete(rec.key);
    rec.evicted = true;
    rec.actor.stop();
    this.idle(rec);
    reply?.resolve({ type: 'notAsked' });
  }

  /** The atomic send failed: unclaimed (nothing recorded or executed), not sent, or lost. */
  private notBooked(rec: Rec, held: HeldOutcome, claim: RecordClaim, err: unknown): Outcome {
    if (!claim.checked) {
      rec.reply = undefined;
      throw new UnclaimedError(err);
    }
    if (err instanceof NotAskedError && rec.actor.getSnapshot().matches('sent')) {
      this.leaveForRecovery(rec, err);
      return held.take();
    }
    const ev: Outcome = err instanceof NotSentError ? { type: 'failed' } : { type: 'lost' };
    if (ev.type === 'lost') {
      rec.pinned = true;
      // The claim's own write failed, after the trade ran in memory: an uncertain record, in memory only.
      const c = claim.context;
      if (!rec.actor.getSnapshot().matches('sent')) this.start({ account_id: c.accountId, client_order_id: c.clientOrderId, params_hash: c.paramsHash, phase: 'uncertain', expires_at: c.expiresAt }).pinned = true;
    }
    this.outcome(rec, ev, err);
    return held.take();
  }

}
