// The pieces of an idempotency record's atomic claim (TradeDesk.sendAtomically, accountTrade.ts):
// the claim the embedded broker runs inside its booking's transaction, and the outcome the
// claiming request takes once the booking is durable. Plain objects with methods: as literals
// with closures (and a promise for the outcome) they were ~0.6 KB of young garbage an order (issue 19).
import type { Actor } from 'xstate';
import type { idempotencyMachine, IdempotencyContext, IdempotencyEvent, StoredResult } from '../../../actors/idempotency.js';
import type { FreshRecord } from '../../../actors/idempotencyFresh.js';
import type { AtomicClaim } from '../../broker/types.js';
import { apiError } from '../../errors.js';
import type { TradeResult } from '../../market/orders.js';
import type { IdempotencyStore } from '../../store/idempotency.js';
import type { TradeReply } from './accountCommands.js';
import { answer, lostError, notAskedError, notSentError } from './tradeRequest.js';

/** A record's machine: an xstate actor, or for a fresh claim its plain twin (actors/idempotencyFresh.ts). */
export type IdemActor = Actor<typeof idempotencyMachine> | FreshRecord;
/** A claim's outcome: the machine's (done, failed, lost), or `notAsked` (TradeDesk.leaveForRecovery:
 *  the record is left to be restored `recovering`, and the machine takes no event). */
export type Outcome = RecordEvent | { type: 'notAsked' };
/** The outcomes the record's machine takes. */
export type RecordEvent = Exclude<IdempotencyEvent, { type: 'send' }>;

/** A durable record exists for the id: settled records live on disk only, not in memory. */
export class RecordExistsError extends Error {}

/** The record stopped before it settled: its shard stopped, or (cluster mode) the account moved to
 *  another node while the request was in flight. The id stays claimed, on disk or in the cluster's
 *  ledger, so a retry with it is safe wherever it lands: 503, retry. */
export const stoppedError = () => apiError('SERVICE_UNAVAILABLE', 'the account stopped here (the gateway is stopping, or the account moved to another node) while this request was in flight; retry with the same clientOrderId: it is answered once, wherever it lands', {
  headers: { 'retry-after': '1' },
});

/** An atomic send whose claim never happened (`cause`): nothing was recorded or executed. */
export class UnclaimedError extends Error {
  constructor(override readonly cause: unknown) {
    super('idempotency claim not made');
  }
}

/** A stored answer as the reply (written out: `{ ...result, replay }` takes V8's slow path on Node 20). */
export const tradeReply = (r: StoredResult, replay: boolean): TradeReply => ({ status: r.status, json: r.json, replay });

/** The answer of a claim's outcome: its result, else the error of a lost or an unsent order. */
export function replyOf(ev: Outcome): TradeReply {
  if (ev.type === 'done') return tradeReply(ev.result, false);
  if (ev.type === 'lost') throw lostError();
  if (ev.type === 'notAsked') throw notAskedError();
  throw notSentError();
}

/** An outcome given (or a failure) on this thread before it is taken: the first one counts. */
export class HeldOutcome {
  private ev: Outcome | undefined;
  private err: Error | undefined;
  resolve(ev: Outcome): void {
    if (!this.err) this.ev ??= ev;
  }
  reject(err: Error): void {
    if (!this.ev) this.err ??= err;
  }
  take(): Outcome {
    if (this.ev) return this.ev;
    throw this.err ?? new Error('idempotency outcome taken before it was given');
  }
}

/** A fresh record's claim, made atomic with the broker's booking. */
export class RecordClaim implements AtomicClaim {
  /** check() passed: from here on the claim may have been written. */
  checked = false;
  booked: TradeResult | undefined;

  constructor(
    private readonly store: IdempotencyStore,
    readonly actor: IdemActor,
    readonly context: IdempotencyContext,
  ) {}

  /** A row (settled, let go from memory) refuses the claim before anything executes. */
  check(): void {
    if (this.store.exists(this.context.accountId, this.context.clientOrderId)) throw new RecordExistsError(`idempotency record ${this.context.clientOrderId} already exists`);
    this.checked = true;
  }

  /** The booking's result is known before its commit: the record takes it in the same transaction
   *  (sent, then result), written once as it ends, so nothing is left after the reply. */
  write(booked: TradeResult | undefined): void {
    this.booked = booked;
    this.store.writeOnce(settleClaim, this);
  }
}

/** The claim's event: read by the machine, never changed or kept apart from its snapshot. */
const SEND = Object.freeze({ type: 'send' } as const);

function settleClaim(claim: RecordClaim): void {
  const actor = claim.actor;
  actor.send(SEND);
  const s = actor.getSnapshot();
  if (s.status !== 'active' || !s.matches('sent')) throw s.status === 'error' ? s.error : stoppedError();
  if (claim.booked !== undefined) {
    actor.send({ type: 'done', result: answer(claim.booked) });
    const r = actor.getSnapshot();
    if (r.status !== 'active' || !r.matches('result')) throw r.status === 'error' ? r.error : stoppedError();
  }
}
