// One gateway subscription (SPEC §4.4 Subscribe*, pushed on /ws): quotes of a symbol, candles of
// a (symbol, timeframe), or the order book of a symbol. It lives until it is unsubscribed or its
// session ends: the session spawns it as a child, and a child is stopped with its parent.
//
// Pure: the broker side is the `lease` actor (provided by the host), invoked while `active`, so
// its cleanup releases the broker subscription however the state is left, including when the
// actor is stopped (xstate v5 runs no exit actions on stop, but it does stop invoked actors).
// Throttling is a timer state: with `intervalMs` > 0 at most one frame per interval leaves, the
// latest one (quotes coalesce latest-wins); a frame marked `urgent` (a finished candle) is never
// held back or dropped.
import { assign, fromCallback, setup, type EventObject } from 'xstate';

export type SubscriptionKind = 'quote' | 'ohlc' | 'book';

export interface SubscriptionSpec {
  kind: SubscriptionKind;
  symbol: string;
  /** Candle subscriptions: timeframe name (M1, H1...). */
  timeframe?: string;
  /** Minimum spacing of pushes in ms; 0 = every update. */
  intervalMs: number;
}

/** Stable identity of a subscription within a session (at most one per key). */
export function subscriptionKey(s: Pick<SubscriptionSpec, 'kind' | 'symbol' | 'timeframe'>): string {
  return s.kind === 'ohlc' ? `ohlc:${s.symbol}:${s.timeframe}` : `${s.kind}:${s.symbol}`;
}

export interface SubscriptionContext extends SubscriptionSpec {
  key: string;
  /** The newest frame held back by the interval, if any. */
  pending: unknown;
  pushed: number;
}

export type SubscriptionEvent =
  | { type: 'data'; frame: unknown; urgent?: boolean }
  | { type: 'interval.set'; intervalMs: number }
  | { type: 'unsubscribe' };

export const subscriptionMachine = setup({
  types: {
    input: {} as SubscriptionSpec,
    context: {} as SubscriptionContext,
    events: {} as SubscriptionEvent,
  },
  actors: {
    /** Provided by the host: subscribes at the broker; the returned cleanup unsubscribes. */
    lease: fromCallback<EventObject, SubscriptionSpec & { key: string }>(() => () => {}),
  },
  actions: {
    /** Provided by the host: sends one frame to the session's /ws sockets. */
    push: (_args, _params: { key: string; frame: unknown }) => {},
    hold: assign({ pending: ({ event }) => (event.type === 'data' ? event.frame : undefined) }),
    clear: assign({ pending: undefined }),
    count: assign({ pushed: ({ context }) => context.pushed + 1 }),
  },
  guards: {
    unthrottled: ({ context }) => context.intervalMs <= 0,
    urgent: ({ event }) => event.type === 'data' && event.urgent === true,
    hasPending: ({ context }) => context.pending !== undefined,
  },
  delays: {
    interval: ({ context }) => context.intervalMs,
  },
}).createMachine({
  id: 'subscription',
  context: ({ input }) => ({ ...input, key: subscriptionKey(input), pending: undefined, pushed: 0 }),
  initial: 'active',
  states: {
    active: {
      invoke: {
        src: 'lease',
        input: ({ context }) => ({ kind: context.kind, symbol: context.symbol, timeframe: context.timeframe, intervalMs: context.intervalMs, key: context.key }),
      },
      on: {
        unsubscribe: 'ended',
        'interval.set': { actions: assign({ intervalMs: ({ event }) => Math.max(0, event.intervalMs) }) },
      },
      initial: 'ready',
      states: {
        ready: {
          on: {
            data: [
              { guard: 'unthrottled', actions: [{ type: 'push', params: ({ context, event }) => ({ key: context.key, frame: event.frame }) }, 'count'] },
              { target: 'cooling', actions: [{ type: 'push', params: ({ context, event }) => ({ key: context.key, frame: event.frame }) }, 'count'] },
            ],
          },
        },
        cooling: {
          on: {
            data: [
              {
                guard: 'urgent',
                // A finished bar goes out at once; whatever was held is older than it.
                actions: ['clear', { type: 'push', params: ({ context, event }) => ({ key: context.key, frame: event.frame }) }, 'count'],
              },
              { actions: 'hold' },
            ],
          },
          after: {
            interval: [
              {
                guard: 'hasPending',
                target: 'cooling',
                reenter: true,
                actions: [{ type: 'push', params: ({ context }) => ({ key: context.key, frame: context.pending }) }, 'clear', 'count'],
              },
              { target: 'ready' },
            ],
          },
        },
      },
    },
    ended: { type: 'final' },
  },
});
