import fc from 'fast-check';
import { createActor, fromCallback, type EventObject } from 'xstate';
import { describe, expect, it } from 'vitest';
import { sessionMachine, type SessionState } from '../../actors/session.js';
import { subscriptionMachine, type SubscriptionSpec } from '../../actors/subscription.js';

function harness() {
  const leases = new Set<string>();
  const persisted: Array<{ state: SessionState; handleHash: string | null }> = [];
  const pushes: Array<{ key: string; frame: unknown }> = [];
  const machine = sessionMachine.provide({
    actors: {
      subscription: subscriptionMachine.provide({
        actors: {
          lease: fromCallback<EventObject, SubscriptionSpec & { key: string }>(({ input }) => {
            leases.add(input.key);
            return () => leases.delete(input.key);
          }),
        },
        actions: { push: (_a, p) => pushes.push(p) },
      }),
    },
    actions: {
      persist: (_a, p) => persisted.push({ state: p.state, handleHash: p.context.handleHash }),
    },
  });
  const actor = createActor(machine, { input: { accountId: 'a1', customerId: 'c1', platform: 'P5' } });
  actor.subscribe({ error: (e) => { throw e; } });
  actor.start();
  return { actor, leases, persisted, pushes };
}

const quote = (symbol: string, intervalMs = 0): SubscriptionSpec => ({ kind: 'quote', symbol, intervalMs });

describe('session machine', () => {
  it('none → live on connect, keeps the handle on a second connect, invalidated on disconnect', () => {
    const { actor, persisted } = harness();
    expect(actor.getSnapshot().value).toBe('none');
    actor.send({ type: 'connect', handleHash: 'h1', handleSealed: 's1', at: 1000 });
    expect(actor.getSnapshot().value).toBe('live');
    actor.send({ type: 'connect', handleHash: 'h2', handleSealed: 's2', at: 2000 });
    expect(actor.getSnapshot().context).toMatchObject({ handleHash: 'h1', handleSealed: 's1', connectedAt: 1000 });
    actor.send({ type: 'disconnect', at: 3000 });
    expect(actor.getSnapshot().value).toBe('invalidated');
    expect(actor.getSnapshot().status).toBe('done');
    expect(persisted).toEqual([{ state: 'live', handleHash: 'h1' }, { state: 'invalidated', handleHash: 'h1' }]);
  });

  it('resumes live from storage without a connect', () => {
    const a = createActor(sessionMachine, { input: { accountId: 'a', customerId: 'c', platform: 'P4', resume: { handleHash: 'h', handleSealed: 's', connectedAt: 5 } } }).start();
    expect(a.getSnapshot().value).toBe('live');
    expect(a.getSnapshot().context.connectedAt).toBe(5);
  });

  it('subscriptions hold a broker lease until unsubscribed or the session ends', () => {
    const { actor, leases } = harness();
    actor.send({ type: 'subscribe', spec: quote('EURUSD') }); // ignored before connect
    expect(leases.size).toBe(0);
    actor.send({ type: 'connect', handleHash: 'h', handleSealed: 's', at: 1 });
    actor.send({ type: 'subscribe', spec: quote('EURUSD') });
    actor.send({ type: 'subscribe', spec: { kind: 'ohlc', symbol: 'EURUSD', timeframe: 'M1', intervalMs: 0 } });
    actor.send({ type: 'subscribe', spec: quote('GBPUSD') });
    expect([...leases].sort()).toEqual(['ohlc:EURUSD:M1', 'quote:EURUSD', 'quote:GBPUSD']);
    actor.send({ type: 'unsubscribe', key: 'quote:EURUSD' });
    expect([...leases].sort()).toEqual(['ohlc:EURUSD:M1', 'quote:GBPUSD']);
    expect(Object.keys(actor.getSnapshot().context.subscriptions).sort()).toEqual(['ohlc:EURUSD:M1', 'quote:GBPUSD']);
    actor.send({ type: 'disconnect', at: 2 });
    expect(leases.size).toBe(0);
  });

  it('property: leases and listed subscriptions always match a simple model', () => {
    const symbols = ['EURUSD', 'GBPUSD', 'XAUUSD'];
    const cmd = fc.oneof(
      fc.constant({ t: 'connect' as const }),
      fc.constant({ t: 'disconnect' as const }),
      fc.record({ t: fc.constant('sub' as const), s: fc.constantFrom(...symbols), kind: fc.constantFrom('quote' as const, 'book' as const) }),
      fc.record({ t: fc.constant('unsub' as const), s: fc.constantFrom(...symbols), kind: fc.constantFrom('quote' as const, 'book' as const) }),
    );
    fc.assert(
      fc.property(fc.array(cmd, { maxLength: 40 }), (cmds) => {
        const { actor, leases } = harness();
        let state: SessionState = 'none';
        const subs = new Set<string>();
        let handle: string | null = null;
        cmds.forEach((c, i) => {
          // A final actor ignores everything (xstate only warns); the model says the same.
          if (state === 'invalidated') return;
          if (c.t === 'connect') {
            actor.send({ type: 'connect', handleHash: `h${i}`, handleSealed: `s${i}`, at: i });
            if (state === 'none') {
              state = 'live';
              handle = `h${i}`;
            }
          } else if (c.t === 'disconnect') {
            actor.send({ type: 'disconnect', at: i });
            if (state === 'live') {
              state = 'invalidated';
              subs.clear();
            }
          } else if (c.t === 'sub') {
            actor.send({ type: 'subscribe', spec: { kind: c.kind, symbol: c.s, intervalMs: 0 } });
            if (state === 'live') subs.add(`${c.kind}:${c.s}`);
          } else {
            actor.send({ type: 'unsubscribe', key: `${c.kind}:${c.s}` });
            if (state === 'live') subs.delete(`${c.kind}:${c.s}`);
          }
          const snap = actor.getSnapshot();
          expect(snap.value).toBe(state);
          expect(snap.context.handleHash).toBe(handle);
          expect(new Set(Object.keys(snap.context.subscriptions))).toEqual(subs);
          expect(new Set(leases)).toEqual(subs);
        });
      }),
      { numRuns: 200 },
    );
  });
});
