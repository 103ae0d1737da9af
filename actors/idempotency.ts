// One idempotency record (SPEC §3 "Idempotency record", §7 409/422, §8): per account and
// clientOrderId, new → sent → result | uncertain, forgotten 24 h after creation.
//
// Durability order (the whole point): entering `sent` runs `persistSent` (a synchronous SQLite
// commit in the host) BEFORE the invoked `execute` actor starts and sends the order to the broker
// (xstate runs a state's entry actions before it starts the state's invoked actors). So whatever
// happens next, a crash included, the id is known to have possibly been sent:
// - execute resolves   → `result` (fills and broker rejections alike: both are final and replayed);
// - execute rejects with `notSent` (the broker certainly never got it) → `discarded`, the record
//   is removed and the id may be used again;
// - any other failure (reply lost after send, shard died) → `uncertain`: a retry answers 409 and
//   nothing is ever sent again under this id.
// A record restored with phase 'sent' (the shard died mid-send) therefore resolves to `uncertain`.
//
// Expiry is the `ttl` delay computed from the durable `expiresAt`, so a restored record waits only
// the remaining time (xstate does not reschedule `after` timers of a restored snapshot).
import { assign, fromPromise, setup } from 'xstate';

/** What a request is answered with, stored as is and replayed verbatim. */
export interface StoredResult {
  status: number;
  body: unknown;
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

/** Thrown by `execute` when the request certainly did not reach the broker. */
export class NotSentError extends Error {
  readonly notSent = true;
}

export const idempotencyMachine = setup({
  types: {
    input: {} as IdempotencyInput,
    context: {} as IdempotencyContext,
    events: {} as { type: 'send' },
  },
  actors: {
    /** Provided by the host: sends the order with requestId = clientOrderId, resolves the final answer. */
    execute: fromPromise<StoredResult, { accountId: string; clientOrderId: string }>(async () => {
      throw new Error('execute not provided');
    }),
  },
  actions: {
    persistSent: (_a, _p: IdempotencyContext) => {},
    persistResult: (_a, _p: IdempotencyContext) => {},
    persistUncertain: (_a, _p: IdempotencyContext) => {},
    forget: (_a, _p: IdempotencyContext) => {},
  },
  guards: {
    hasResult: ({ context }) => context.phase === 'result' && context.result !== undefined,
    /** 'sent' without a result after a restart is treated like 'uncertain'. */
    wasSent: ({ context }) => context.phase === 'sent' || context.phase === 'uncertain',
    isExpired: ({ context }) => context.expiresAt <= Date.now(),
    notSent: ({ event }) => (event as { error?: { notSent?: unknown } }).error?.notSent === true,
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
        { guard: 'wasSent', target: 'uncertain' },
        { target: 'new' },
      ],
    },
    new: {
      on: { send: 'sent' },
    },
    sent: {
      entry: [assign({ phase: 'sent' }), { type: 'persistSent', params: ({ context }) => context }],
      invoke: {
        src: 'execute',
        input: ({ context }) => ({ accountId: context.accountId, clientOrderId: context.clientOrderId }),
        onDone: {
          target: 'result',
          actions: [
            assign({ phase: 'result', result: ({ event }) => event.output }),
            { type: 'persistResult', params: ({ context }) => context },
          ],
        },
        onError: [
          { guard: 'notSent', target: 'discarded' },
          { target: 'uncertain' },
        ],
      },
    },
    result: {
      after: { ttl: 'expired' },
    },
    uncertain: {
      entry: [assign({ phase: 'uncertain' }), { type: 'persistUncertain', params: ({ context }) => context }],
      after: { ttl: 'expired' },
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
