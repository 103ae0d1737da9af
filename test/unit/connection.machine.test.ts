// The connection machine on its own, driven by xstate's SimulatedClock and a scripted fake
// "broker" whose connect() the test resolves or rejects at will.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor, fromPromise, SimulatedClock } from 'xstate';
import { backoffMs, connectionMachine, phaseOf } from '../../actors/connection.js';

interface Deferred { resolve: () => void; reject: (e: unknown) => void }

/** A fake upstream: counts live connections; connect() waits for the test to decide. */
function world() {
  const w = {
    live: 0,
    maxLive: 0,
    connectCalls: 0,
    disconnects: 0,
    pending: null as Deferred | null,
    phases: [] as string[],
  };
  const machine = connectionMachine.provide({
    actors: {
      connect: fromPromise(
        ({ signal }) =>
          new Promise<void>((resolve, reject) => {
            w.connectCalls++;
            w.pending = {
              resolve: () => {
                // Like the host: a connect that completes after its attempt was abandoned is closed at once.
                if (signal.aborted) return;
                w.live++;
                w.maxLive = Math.max(w.maxLive, w.live);
                resolve();
              },
              reject,
            };
          }),
      ),
      disconnect: fromPromise(async () => {
        w.disconnects++;
        if (w.live > 0) w.live--;
      }),
    },
    actions: { notify: (_a, p) => void w.phases.push(p.phase) },
    // Deterministic backoff in tests: the upper bound of the jittered window.
    delays: { backoff: ({ context }) => backoffMs(context.attempt, context.backoffBaseMs, context.backoffCapMs, () => 1) },
  });
  const clock = new SimulatedClock();
  const actor = createActor(machine, { input: { accountId: 'a1', backoffBaseMs: 100, backoffCapMs: 1_000 }, clock });
  const errors: unknown[] = [];
  actor.subscribe({ error: (e) => void errors.push(e) });
  return { w, clock, actor, errors };
}

const flush = () => new Promise((r) => setImmediate(r));
const authError = Object.assign(new Error('invalid login or password'), { code: 'BROKER_AUTH' });

describe('backoff', () => {
  it('grows exponentially, is capped, and jitters within [d/2, d]', () => {
    expect(backoffMs(0, 100, 1_000, () => 1)).toBe(100);
    expect(backoffMs(3, 100, 1_000, () => 1)).toBe(800);
    expect(backoffMs(10, 100, 1_000, () => 1)).toBe(1_000);
    expect(backoffMs(10, 100, 1_000, () => 0)).toBe(500);
    fc.assert(fc.property(fc.nat(60), fc.double({ min: 0, max: 1, noNaN: true }), (n, r) => {
      const d = backoffMs(n, 250, 30_000, () => r);
      const full = Math.min(30_000, 250 * 2 ** n);
      return d >= Math.floor(full / 2) && d <= full;
    }));
  });
});

describe('connection machine', () => {
  it('connecting → connected → reconnecting → connected, waiting the backoff as a state', async () => {
    const { w, clock, actor } = world();
    actor.start();
    expect(actor.getSnapshot().value).toEqual({ connecting: 'attempt' });
    w.pending!.resolve();
    await flush();
    expect(actor.getSnapshot().value).toBe('connected');

    w.live--; // the broker dropped it
    actor.send({ type: 'broker.dropped', reason: 'reset' });
    expect(actor.getSnapshot().value).toEqual({ reconnecting: 'waiting' });
    expect(phaseOf(actor.getSnapshot().value, actor.getSnapshot().context.everConnected)).toBe('reconnecting');
    clock.increment(99);
    expect(w.connectCalls).toBe(1);
    clock.increment(1);
    expect(actor.getSnapshot().value).toEqual({ reconnecting: 'attempt' });
    w.pending!.reject(new Error('unreachable'));
    await flush();
    // Second wait is twice as long.
    expect(actor.getSnapshot().value).toEqual({ reconnecting: 'waiting' });
    clock.increment(199);
    expect(w.connectCalls).toBe(2);
    clock.increment(1);
    expect(w.connectCalls).toBe(3);
    w.pending!.resolve();
    await flush();
    expect(actor.getSnapshot().value).toBe('connected');
    expect(actor.getSnapshot().context.attempt).toBe(0);
    expect(w.phases).toEqual(['connecting', 'connected', 'reconnecting', 'connected']);
  });

  it('check (CheckConnect) cuts a reconnect wait short', async () => {
    const { w, actor } = world();
    actor.start();
    w.pending!.resolve();
    await flush();
    actor.send({ type: 'broker.dropped' });
    expect(w.connectCalls).toBe(1);
    actor.send({ type: 'check' });
    expect(w.connectCalls).toBe(2);
    expect(actor.getSnapshot().value).toEqual({ reconnecting: 'attempt' });
  });

  it.each([
    ['a wrong password', () => authError],
    ['a server the broker does not know', () => Object.assign(new Error('unknown broker server X'), { code: 'BROKER_REQUEST' })],
  ])('a refused login (%s) stops retrying (authFailed) until check', async (_name, refusal) => {
    const { w, clock, actor } = world();
    actor.start();
    w.pending!.reject(refusal());
    await flush();
    expect(actor.getSnapshot().value).toBe('authFailed');
    clock.increment(60_000);
    expect(w.connectCalls).toBe(1);
    actor.send({ type: 'check' });
    expect(w.connectCalls).toBe(2);
  });

  it('drain waits for drained, then disconnects and stops', async () => {
    const { w, actor } = world();
    actor.start();
    w.pending!.resolve();
    await flush();
    actor.send({ type: 'drain' });
    expect(actor.getSnapshot().value).toBe('draining');
    expect(phaseOf('draining', true)).toBe('connected');
    await flush();
    expect(w.disconnects).toBe(0);
    actor.send({ type: 'drained' });
    await flush();
    expect(w.disconnects).toBe(1);
    expect(actor.getSnapshot().status).toBe('done');
    expect(w.live).toBe(0);
  });

  it('property: any event sequence keeps a valid state and at most one live connection, live exactly while connected (or draining)', async () => {
    type Cmd = 'ok' | 'fail' | 'auth' | 'drop' | 'check' | 'drain' | 'drained' | 'tick' | 'tickLong';
    const cmd = fc.constantFrom<Cmd>('ok', 'fail', 'auth', 'drop', 'check', 'drain', 'drained', 'tick', 'tickLong');
    const VALID = ['connecting.attempt', 'connecting.waiting', 'connected', 'reconnecting.waiting', 'reconnecting.attempt', 'authFailed', 'draining', 'closing', 'stopped'];
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { maxLength: 60 }), async (cmds) => {
        const { w, clock, actor, errors } = world();
        actor.start();
        for (const c of cmds) {
          const snap = actor.getSnapshot();
          if (snap.status === 'done') break;
          switch (c) {
            case 'ok':
            case 'fail':
            case 'auth': {
              const p = w.pending;
              w.pending = null;
              if (p) {
                if (c === 'ok') p.resolve();
                else p.reject(c === 'auth' ? authError : new Error('unreachable'));
              }
              break;
            }
            case 'drop':
              // The upstream drops a live connection and tells the actor.
              if (w.live > 0 && snap.matches('connected')) {
                w.live--;
                actor.send({ type: 'broker.dropped' });
              }
              break;
            case 'tick': clock.increment(150); break;
            case 'tickLong': clock.increment(5_000); break;
            default: actor.send({ type: c });
          }
          await flush();
          const s = actor.getSnapshot();
          const v = typeof s.value === 'string' ? s.value : Object.entries(s.value).map(([k, x]) => `${k}.${String(x)}`)[0]!;
          expect(VALID).toContain(v);
          expect(w.live).toBeLessThanOrEqual(1);
          if (v === 'connected') expect(w.live).toBe(1);
          if (!['connected', 'draining'].includes(v)) expect(w.live).toBe(0);
        }
        expect(errors).toEqual([]);
        expect(w.maxLive).toBeLessThanOrEqual(1);
        actor.stop();
      }),
      { numRuns: 150 },
    );
  });
});
