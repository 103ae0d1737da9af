// One idempotency record (SPEC §3 "Idempotency record", §7 409/422, §8): per account and
// clientOrderId, new → sent → result | uncertain, forgotten 24 h after creation.
//
// Durability order (the whole point): the `send` event enters `sent`, whose entry action
// `persistSent` is a synchronous SQLite commit in the host. The host calls the broker only after
// `send` returned with the record in `sent` (a failed commit leaves the actor in error and nothing
// is sent). So whatever happens next, a crash included, the id is known to have possibly been sent.
// The host then reports the outcome of its one broker call as an event:
// - `done {result}` → `result` (fills and broker rejections alike: both are final and replayed);
// - `failed` (the broker certainly never got it) → `discarded`, the record is removed and the id
//   may be used again;
// - `lost` (reply lost after send and the broker could not say) → `uncertain`: a retry answers 409
//   and nothing is ever sent again under this id.
// A record restored with phase 'sent' (the shard or the process died while its order was at the
// broker, or after the reply but before the outcome was written) enters `recovering`: the host asks
// the broker what it did with the record's request id at the next request for the id, and sends
// `done` (the broker executed it: its result is replayed, as the first answer was), `lost` (a broker
// in another process never saw it, which after a crash may still mean "in transit": `uncertain`) or
// `notExecuted` (a broker in this process, the embedded simulator, never saw it: it journals what it
// executes in the same database and died with the sender, so nothing is in transit and the order
// never executed; the record is removed and the id is free). `failed` is not a recovery outcome:
// it speaks of a send this process made, and a restored record's send was made by another.
//
// The broker call is the host's, not an invoked promise actor: an `invoke` per record cost ~65 µs
// of the order's latency (a child actor, its system registration and a promise round), for nothing
// the host does not know already.
//
// Expiry: `result` and `uncertain` are where a record rests for the rest of its 24 h, and the host
// lets a resting record go from memory (its row is the record; TradeDesk). So they hold no timer:
// a record brought back from its row checks `expiresAt` on entry (`resolving`), and the store
// sweeps expired rows. A record with work left (`recovering`) expires by the `ttl` delay computed
// from the durable `expiresAt`, so a restored one waits only the remaining time.
import { assign, setup } from 'xstate';

/** What a request is answered with, stored as is and replayed verbatim. The body is JSON text,
 *  serialized once where the result is made: the same bytes are written to the record's row,
 *  cross to the HTTP thread as one string (not an object graph to clone) and are sent as they are. */
export interface StoredResult {
  status: number;
  json: string;
}

export type IdemPhase = 'new' | 'sent' | 'result' | 'uncertain';

export interface IdempotencyInput {
  accountId: string;
  clientOrderId: string;
  paramsHash: string;
  /** Phase of the durable record; 'new' when there is none yet. */
  phase: IdemPhase;
  expiresAt: number;
  result?: StoredResult;
}

export interface IdempotencyContext extends IdempotencyInput {
  result: StoredResult | undefined;
}

/** Thrown by the host's broker call when the request certainly did not reach the broker. */
export class NotSentError extends Error {
  readonly notSent = true;
}

export type IdempotencyEvent =
  /** Claim the id: persist 'sent'; the host sends the order once this returned. */
  | { type: 'send' }
  /** The broker's final answer (a fill or a rejection). */
  | { type: 'done'; result: StoredResult }
  /** The order certainly did not reach the broker. */
  | { type: 'failed' }
  /** Sent, but its outcome is unknown. */
  | { type: 'lost' }
  /** Restored `sent`: the broker runs in this process and has no trace of it, so it never executed. */
  | { type: 'notExecuted' };

export const idempotencyMachine = setup({
  types: {
    input: {} as IdempotencyInput,
    context: {} as IdempotencyContext,
    events: {} as IdempotencyEvent,
  },
  actions: {
    persistSent: (_a, _p: IdempotencyContext) => {},
    persistResult: (_a, _p: IdempotencyContext) => {},
    persistUncertain: (_a, _p: IdempotencyContext) => {},
    forget: (_a, _p: IdempotencyContext) => {},
    /** `done`, from `sent` or `recovering`: the broker's answer becomes the record's result. */
    takeResult: assign({ phase: 'result', result: ({ event }) => (event as Extract<IdempotencyEvent, { type: 'done' }>).result }),
  },
  guards: {
    hasResult: ({ context }) => context.phase === 'result' && context.result !== undefined,
    wasUncertain: ({ context }) => context.phase === 'uncertain',
    /** 'sent' without a result after a restart: the broker is asked before anything is answered. */
    wasSent: ({ context }) => context.phase === 'sent',
    isExpired: ({ context }) => context.expiresAt <= Date.now(),
  },
  delays: {
    ttl: ({ context }) => Math.max(0, context.expiresAt - Date.now()),
  },
}).createMachine({
  id: 'idempotency',
  context: ({ input }) => ({ ...input, result: input.result }),
  initial: 'resolving',
  states: {
    resolving: {
      always: [
        { guard: 'isExpired', target: 'expired' },
        { guard: 'hasResult', target: 'result' },
        { guard: 'wasUncertain', target: 'uncertain' },
        { guard: 'wasSent', target: 'recovering' },
        { target: 'new' },
      ],
    },
    new: {
      on: { send: 'sent' },
    },
    sent: {
      entry: [assign({ phase: 'sent' }), { type: 'persistSent', params: ({ context }) => context }],
      on: {
        done: { target: 'result', actions: ['takeResult', { type: 'persistResult', params: ({ context }) => context }] },
        failed: 'discarded',
        lost: 'uncertain',
      },
    },
    recovering: {
      on: {
        done: { target: 'result', actions: ['takeResult', { type: 'persistResult', params: ({ context }) => context }] },
        notExecuted: 'discarded',
        lost: 'uncertain',
      },
      after: { ttl: 'expired' },
    },
    result: {},
    uncertain: {
      entry: [assign({ phase: 'uncertain' }), { type: 'persistUncertain', params: ({ context }) => context }],
    },
    discarded: {
      type: 'final',
      entry: { type: 'forget', params: ({ context }) => context },
    },
    expired: {
      type: 'final',
      entry: { type: 'forget', params: ({ context }) => context },
    },
  },
});

/**
 * The snapshot of a fresh claim, in `new`, for `createActor(machine, { snapshot })`. Starting from
 * it skips the initial `resolving` step, which only sorts out restored records and cost a fresh
 * order ~15-40 µs. Takes the host's provided machine.
 */
export function freshRecord(machine: typeof idempotencyMachine, input: Omit<IdempotencyInput, 'phase' | 'result'>) {
  return machine.resolveState({ value: 'new', context: { ...input, phase: 'new', result: undefined } });
}
