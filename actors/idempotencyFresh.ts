// The idempotency machine (./idempotency.ts, the source of truth) for a fresh claim, as plain
// state: new → sent → result | uncertain | discarded, with the same actions at the same points and
// the same snapshot shape. An order's record is created, claimed and settled within one request, and
// the xstate actor for it (created from its snapshot, started, two events, stopped) cost every
// idempotent order ~14 µs hot and several times that on a shard thread that had slept. Records
// restored from disk (recovering, with its expiry timer; resting records answered again) stay
// xstate actors. test/unit/idempotency.fresh.property.test.ts runs random event sequences, failing
// actions included, through both and requires the same states, contexts, statuses and action calls.
import type { IdempotencyContext, IdempotencyEvent, IdempotencyInput } from './idempotency.js';

/** The machine's provided actions, as the plain record calls them (`self` for `forget`). */
export interface FreshRecordActions {
  persistSent(c: IdempotencyContext): void;
  persistResult(c: IdempotencyContext): void;
  persistUncertain(c: IdempotencyContext): void;
  forget(self: unknown, c: IdempotencyContext): void;
}

type FreshState = 'new' | 'sent' | 'result' | 'uncertain' | 'discarded';

/** A record started in `new` (what `freshRecord` resolves to), answering like an xstate actor of it. */
export class FreshRecord {
  status: 'active' | 'done' | 'error' | 'stopped' = 'active';
  value: FreshState = 'new';
  error: unknown = undefined;
  context: IdempotencyContext;

  constructor(
    input: Omit<IdempotencyInput, 'phase' | 'result'>,
    private readonly actions: FreshRecordActions,
    /** As an xstate error observer: told when an action threw (the record is then in error). */
    private readonly onError: (err: unknown) => void,
  ) {
    this.context = { accountId: input.accountId, clientOrderId: input.clientOrderId, paramsHash: input.paramsHash, expiresAt: input.expiresAt, phase: 'new', result: undefined };
  }

  /** The context in `phase`: written out, not `{ ...context, phase }`, as the machine's assign makes
   *  it (same keys, same order): on Node 20 an object spread followed by more properties takes V8's
   *  slow path, ~0.5 us a property, and every idempotent order made three such contexts. */
  private next(phase: IdempotencyContext['phase'], result: IdempotencyContext['result']): IdempotencyContext {
    const c = this.context;
    return { accountId: c.accountId, clientOrderId: c.clientOrderId, paramsHash: c.paramsHash, expiresAt: c.expiresAt, phase, result };
  }

  /** The record is its own snapshot (read it before the next `send`, as with an actor's). */
  getSnapshot(): this {
    return this;
  }

  matches(state: FreshState | 'recovering' | 'expired' | 'resolving'): boolean {
    return this.value === state;
  }

  send(ev: IdempotencyEvent): void {
    if (this.status !== 'active') return;
    try {
      if (this.value === 'new' && ev.type === 'send') {
        this.enter('sent', this.next('sent', this.context.result));
        this.actions.persistSent(this.context);
      } else if (this.value === 'sent') {
        if (ev.type === 'done') {
          this.enter('result', this.next('result', ev.result));
          this.actions.persistResult(this.context);
        } else if (ev.type === 'lost') {
          this.enter('uncertain', this.next('uncertain', this.context.result));
          this.actions.persistUncertain(this.context);
        } else if (ev.type === 'failed') {
          this.enter('discarded', this.context);
          this.status = 'done';
          this.actions.forget(this, this.context);
        }
      }
    } catch (err) {
      this.status = 'error';
      this.error = err;
      this.onError(err);
    }
  }

  stop(): void {
    if (this.status === 'active') this.status = 'stopped';
  }

  private enter(state: FreshState, context: IdempotencyContext): void {
    this.value = state;
    this.context = context;
  }
}
