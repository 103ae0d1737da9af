import { createActor, fromCallback, type EventObject } from 'xstate';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { subscriptionMachine, type SubscriptionSpec } from '../../actors/subscription.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function start(spec: SubscriptionSpec) {
  const pushed: unknown[] = [];
  let leased = 0;
  const actor = createActor(
    subscriptionMachine.provide({
      actors: {
        lease: fromCallback<EventObject, SubscriptionSpec & { key: string }>(() => {
          leased++;
          return () => leased--;
        }),
      },
      actions: { push: (_a, p) => pushed.push(p.frame) },
    }),
    { input: spec },
  );
  actor.start();
  return { actor, pushed, leased: () => leased };
}

describe('subscription machine', () => {
  it('without an interval pushes every update', () => {
    const { actor, pushed } = start({ kind: 'quote', symbol: 'EURUSD', intervalMs: 0 });
    for (let i = 0; i < 5; i++) actor.send({ type: 'data', frame: i });
    expect(pushed).toEqual([0, 1, 2, 3, 4]);
  });

  it('with an interval pushes at most one frame per interval, the latest one', () => {
    const { actor, pushed } = start({ kind: 'quote', symbol: 'EURUSD', intervalMs: 100 });
    actor.send({ type: 'data', frame: 1 });
    actor.send({ type: 'data', frame: 2 });
    actor.send({ type: 'data', frame: 3 });
    expect(pushed).toEqual([1]);
    vi.advanceTimersByTime(100);
    expect(pushed).toEqual([1, 3]);
    vi.advanceTimersByTime(100); // nothing held: back to ready
    actor.send({ type: 'data', frame: 4 });
    expect(pushed).toEqual([1, 3, 4]);
  });

  it('never holds back an urgent frame (a finished candle)', () => {
    const { actor, pushed } = start({ kind: 'ohlc', symbol: 'EURUSD', timeframe: 'M1', intervalMs: 1000 });
    actor.send({ type: 'data', frame: 'a' });
    actor.send({ type: 'data', frame: 'b' });
    actor.send({ type: 'data', frame: 'closed', urgent: true });
    expect(pushed).toEqual(['a', 'closed']);
    vi.advanceTimersByTime(1000);
    expect(pushed).toEqual(['a', 'closed']);
  });

  it('releases its lease when unsubscribed and when stopped', () => {
    const s1 = start({ kind: 'book', symbol: 'EURUSD', intervalMs: 0 });
    expect(s1.leased()).toBe(1);
    s1.actor.send({ type: 'unsubscribe' });
    expect(s1.leased()).toBe(0);
    expect(s1.actor.getSnapshot().status).toBe('done');
    const s2 = start({ kind: 'book', symbol: 'EURUSD', intervalMs: 0 });
    s2.actor.stop();
    expect(s2.leased()).toBe(0);
  });
});
