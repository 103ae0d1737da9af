// Properties of the subscription machine (actors/subscription.ts) over random runs of updates,
// urgent frames, interval changes, time and unsubscribe: what a /ws client may rely on whatever the
// order of events. The examples in subscription.machine.test.ts show each rule once; these check
// that no interleaving breaks them.
import fc from 'fast-check';
import { createActor, fromCallback, type EventObject } from 'xstate';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { subscriptionMachine, type SubscriptionSpec } from '../../actors/subscription.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

type Op =
  | { op: 'data'; urgent: boolean }
  | { op: 'wait'; ms: number }
  | { op: 'interval'; ms: number }
  | { op: 'unsubscribe' };

const opArb = (withIntervalChanges: boolean): fc.Arbitrary<Op> => fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('data' as const), urgent: fc.boolean() }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('wait' as const), ms: fc.integer({ min: 0, max: 250 }) }) },
  ...(withIntervalChanges ? [{ weight: 1, arbitrary: fc.record({ op: fc.constant('interval' as const), ms: fc.integer({ min: -10, max: 200 }) }) }] : []),
  { weight: 1, arbitrary: fc.constant({ op: 'unsubscribe' as const }) },
);

/** A frame sent; `live`: before the subscription ended. */
interface Sent { seq: number; at: number; urgent: boolean; live: boolean }
interface Pushed { seq: number; at: number }

/** Runs `ops` against a fresh subscription; frames are their send order (0, 1, ...). */
function run(intervalMs: number, ops: Op[]) {
  const sent: Sent[] = [];
  const pushed: Pushed[] = [];
  let leases = 0;
  let maxLeases = 0;
  const actor = createActor(
    subscriptionMachine.provide({
      actors: {
        lease: fromCallback<EventObject, SubscriptionSpec & { key: string }>(() => {
          leases++;
          maxLeases = Math.max(maxLeases, leases);
          return () => leases--;
        }),
      },
      actions: { push: (_a, p) => pushed.push({ seq: p.frame as number, at: Date.now() }) },
    }),
    { input: { kind: 'quote', symbol: 'EURUSD', intervalMs } },
  );
  actor.start();
  let endedAt: number | null = null;
  const leasesWhileActive: number[] = [];
  for (const o of ops) {
    if (o.op === 'data') {
      // After unsubscribe the session has stopped routing to it (an ended actor takes no events).
      sent.push({ seq: sent.length, at: Date.now(), urgent: o.urgent, live: endedAt === null });
      if (endedAt === null) actor.send({ type: 'data', frame: sent.length - 1, urgent: o.urgent });
    } else if (o.op === 'wait') vi.advanceTimersByTime(o.ms);
    else if (o.op === 'interval') {
      if (endedAt === null) actor.send({ type: 'interval.set', intervalMs: o.ms });
    } else if (endedAt === null) {
      actor.send({ type: 'unsubscribe' });
      endedAt = Date.now();
    }
    if (endedAt === null) leasesWhileActive.push(leases);
  }
  // Quiet: long enough for anything held back to leave.
  vi.advanceTimersByTime(1_000);
  const leasesAfterRun = leases;
  actor.stop();
  return { sent, pushed, endedAt, leasesWhileActive, leasesAfterRun, leasesAfterStop: leases, maxLeases, status: actor.getSnapshot().status };
}

const runs = (withIntervalChanges: boolean) => fc.tuple(fc.integer({ min: 0, max: 150 }), fc.array(opArb(withIntervalChanges), { maxLength: 60 }));

describe('subscription machine (properties)', () => {
  it('pushes frames in the order sent, each at most once, none after unsubscribe; holds one broker lease while active and none after', () => {
    fc.assert(fc.property(runs(true), ([intervalMs, ops]) => {
      const r = run(intervalMs, ops);
      const seqs = r.pushed.map((p) => p.seq);
      // In order, no frame twice.
      for (let i = 1; i < seqs.length; i++) expect(seqs[i]!).toBeGreaterThan(seqs[i - 1]!);
      // Nothing held back leaves after unsubscribe.
      if (r.endedAt !== null) for (const p of r.pushed) expect(p.at).toBeLessThanOrEqual(r.endedAt);
      // Exactly one lease while active; released when ended, and when stopped.
      expect(r.maxLeases).toBe(1);
      for (const n of r.leasesWhileActive) expect(n).toBe(1);
      expect(r.leasesAfterRun).toBe(r.endedAt === null ? 1 : 0);
      expect(r.leasesAfterStop).toBe(0);
    }), { numRuns: 300 });
  });

  it('loses only frames that a later pushed frame replaced: the newest frame always leaves, an urgent one at once', () => {
    fc.assert(fc.property(runs(true), ([intervalMs, ops]) => {
      const r = run(intervalMs, ops);
      const pushedAt = new Map(r.pushed.map((p) => [p.seq, p.at]));
      const live = r.sent.filter((s) => s.live);
      if (r.endedAt === null && live.length > 0) {
        // Latest wins, but the latest is never lost.
        expect(pushedAt.has(live.at(-1)!.seq)).toBe(true);
      }
      for (const s of live) {
        // An urgent frame (a finished candle) is never held back.
        if (s.urgent) expect(pushedAt.get(s.seq)).toBe(s.at);
        // A frame not pushed was superseded by a later one that was (or held when the client unsubscribed).
        if (!pushedAt.has(s.seq) && r.endedAt === null) expect(r.pushed.some((p) => p.seq > s.seq)).toBe(true);
      }
    }), { numRuns: 300 });
  });

  it('with a fixed interval, ordinary pushes are at least the interval apart; without one, every frame leaves at once', () => {
    fc.assert(fc.property(runs(false), ([intervalMs, ops]) => {
      const r = run(intervalMs, ops);
      const urgent = new Set(r.sent.filter((s) => s.urgent).map((s) => s.seq));
      const ordinary = r.pushed.filter((p) => !urgent.has(p.seq));
      for (let i = 1; i < ordinary.length; i++) expect(ordinary[i]!.at - ordinary[i - 1]!.at).toBeGreaterThanOrEqual(intervalMs);
      if (intervalMs === 0) {
        expect(r.pushed).toEqual(r.sent.filter((s) => s.live).map((s) => ({ seq: s.seq, at: s.at })));
      }
    }), { numRuns: 300 });
  });
});
