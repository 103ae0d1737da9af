// A gateway session handle (SPEC §3 "Session handle"): none → live → invalidated.
//   none:        POST /v1/connect opens the session (the host supplies the random handle).
//   live:        a second connect for the same account keeps it (same handle, no second session);
//                Subscribe* spawn subscription children, UnSubscribe* end them.
//   invalidated: Disconnect (or the account going away, or re-bound to the other platform). Final: its subscriptions stop with it,
//                and a later connect creates a new session actor with a new handle.
//
// Pure: the host provides `persist` (durable row per handle) and the subscription logic (with its
// broker lease and push), so tests run the machine with fakes. The plain handle never enters the
// machine: it holds a hash (lookups) and the sealed form (to answer a repeated connect).
import { assign, enqueueActions, setup } from 'xstate';
import { subscriptionKey, subscriptionMachine, type SubscriptionSpec } from './subscription.js';

export type SessionState = 'none' | 'live' | 'invalidated';

export interface SessionInput {
  accountId: string;
  customerId: string;
  platform: 'P4' | 'P5';
  /** Restarting from storage: 'live' resumes a session without a new connect. */
  resume?: { handleHash: string; handleSealed: string; connectedAt: number };
}

export interface SessionContext {
  accountId: string;
  customerId: string;
  platform: 'P4' | 'P5';
  handleHash: string | null;
  handleSealed: string | null;
  /** UTC ms of the connect; ClosedOrders counts from here. */
  connectedAt: number;
  invalidatedAt: number | null;
  /** Specs of the live subscriptions by key (children carry the behaviour; this is for listing and persistence). */
  subscriptions: Record<string, SubscriptionSpec>;
}

export type SessionEvent =
  | { type: 'connect'; handleHash: string; handleSealed: string; at: number }
  | { type: 'disconnect'; at: number }
  | { type: 'subscribe'; spec: SubscriptionSpec }
  | { type: 'unsubscribe'; key: string };

export const sessionMachine = setup({
  types: {
    input: {} as SessionInput,
    context: {} as SessionContext,
    events: {} as SessionEvent,
  },
  actors: {
    subscription: subscriptionMachine,
  },
  actions: {
    /** Provided by the host: writes the session row (state, handle hash, sealed handle, times). */
    persist: (_args, _params: { state: SessionState; context: SessionContext }) => {},
    /** Provided by the host: records the subscription set of the session. */
    persistSubscriptions: (_args, _params: { context: SessionContext }) => {},
  },
  guards: {
    resuming: ({ context }) => context.handleHash !== null,
    isSubscribed: ({ context, event }) => event.type === 'unsubscribe' && event.key in context.subscriptions,
  },
}).createMachine({
  id: 'session',
  context: ({ input }) => ({
    accountId: input.accountId,
    customerId: input.customerId,
    platform: input.platform,
    handleHash: input.resume?.handleHash ?? null,
    handleSealed: input.resume?.handleSealed ?? null,
    connectedAt: input.resume?.connectedAt ?? 0,
    invalidatedAt: null,
    subscriptions: {},
  }),
  initial: 'resolving',
  states: {
    resolving: {
      always: [{ guard: 'resuming', target: 'live' }, { target: 'none' }],
    },
    none: {
      on: {
        connect: {
          target: 'live',
          actions: [
            assign({ handleHash: ({ event }) => event.handleHash, handleSealed: ({ event }) => event.handleSealed, connectedAt: ({ event }) => event.at }),
            { type: 'persist', params: ({ context }) => ({ state: 'live' as const, context }) },
          ],
        },
      },
    },
    live: {
      on: {
        // Same handle while live: a repeated connect changes nothing.
        connect: {},
        subscribe: {
          actions: [
            enqueueActions(({ context, event, enqueue }) => {
              const key = subscriptionKey(event.spec);
              const child = key in context.subscriptions;
              if (child) {
                // Re-subscribing changes the interval only; the broker lease stays.
                enqueue.sendTo(key, { type: 'interval.set', intervalMs: event.spec.intervalMs });
              } else {
                enqueue.spawnChild('subscription', { id: key, input: event.spec });
              }
              enqueue.assign({ subscriptions: { ...context.subscriptions, [key]: event.spec } });
            }),
            { type: 'persistSubscriptions', params: ({ context }) => ({ context }) },
          ],
        },
        unsubscribe: {
          guard: 'isSubscribed',
          actions: [
            enqueueActions(({ context, event, enqueue }) => {
              enqueue.stopChild(event.key);
              const { [event.key]: _gone, ...rest } = context.subscriptions;
              enqueue.assign({ subscriptions: rest });
            }),
            { type: 'persistSubscriptions', params: ({ context }) => ({ context }) },
          ],
        },
        disconnect: {
          target: 'invalidated',
          actions: assign({ invalidatedAt: ({ event }) => event.at }),
        },
      },
    },
    invalidated: {
      type: 'final',
      entry: [
        assign({ subscriptions: {} }),
        { type: 'persist', params: ({ context }) => ({ state: 'invalidated' as const, context }) },
        { type: 'persistSubscriptions', params: ({ context }) => ({ context }) },
      ],
    },
  },
});

export function sessionState(value: unknown): SessionState {
  return value === 'live' ? 'live' : value === 'invalidated' ? 'invalidated' : 'none';
}
