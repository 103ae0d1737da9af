// The plain implementation of a fresh claim's record (actors/idempotencyFresh.ts) against the
// xstate machine it stands for (actors/idempotency.ts): random event sequences, with actions that
// may throw (a failed SQLite write), run through both from `new`; after every event both must be in
// the same state with the same context and status, and have called the same actions with the same
// contexts in the same order.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { freshRecord, idempotencyMachine, type IdempotencyContext, type IdempotencyEvent } from '../../actors/idempotency.js';
import { FreshRecord } from '../../actors/idempotencyFresh.js';

type ActionName = 'persistSent' | 'persistResult' | 'persistUncertain' | 'forget';
const ACTIONS: ActionName[] = ['persistSent', 'persistResult', 'persistUncertain', 'forget'];

/** Records the calls; throws on the calls whose names are in `failing` (each once). */
function recorder(failing: Set<ActionName>) {
  const calls: string[] = [];
  const errors: Error[] = [];
  const call = (name: ActionName, c: IdempotencyContext) => {
    calls.push(`${name} ${JSON.stringify(c)}`);
    if (failing.delete(name)) {
      const e = new Error(`${name} failed`);
      errors.push(e);
      throw e;
    }
  };
  return { calls, errors, call };
}

const event: fc.Arbitrary<IdempotencyEvent | { type: 'stop' }> = fc.oneof(
  fc.constant({ type: 'send' as const }),
  fc.record({ type: fc.constant('done' as const), result: fc.record({ status: fc.constantFrom(200, 400), json: fc.json() }) }),
  fc.constant({ type: 'failed' as const }),
  fc.constant({ type: 'lost' as const }),
  fc.constant({ type: 'notExecuted' as const }),
  fc.constant({ type: 'stop' as const }),
);

describe('FreshRecord (plain) and the idempotency machine (xstate) from a fresh claim', () => {
  it('property: same states, contexts, statuses and action calls on any event sequence, failing actions included', () => {
    fc.assert(
      fc.property(fc.array(event, { maxLength: 8 }), fc.subarray(ACTIONS), fc.string({ minLength: 1, maxLength: 8 }), (events, failing, id) => {
        const input = { accountId: 'a', clientOrderId: id, paramsHash: 'h', expiresAt: Date.now() + 60_000 };
        const x = recorder(new Set(failing));
        const p = recorder(new Set(failing));
        const selves: unknown[] = [];
        const machine = idempotencyMachine.provide({
          actions: {
            persistSent: (_a, c: IdempotencyContext) => x.call('persistSent', c),
            persistResult: (_a, c: IdempotencyContext) => x.call('persistResult', c),
            persistUncertain: (_a, c: IdempotencyContext) => x.call('persistUncertain', c),
            forget: ({ self }, c: IdempotencyContext) => {
              selves.push(self);
              x.call('forget', c);
            },
          },
        });
        const xErrors: unknown[] = [];
        const actor = createActor(machine, { snapshot: freshRecord(machine, input), input: { ...input, phase: 'new' } });
        actor.subscribe({ error: (e) => xErrors.push(e) });
        actor.start();
        const pErrors: unknown[] = [];
        const plain = new FreshRecord(input, {
          persistSent: (c) => p.call('persistSent', c),
          persistResult: (c) => p.call('persistResult', c),
          persistUncertain: (c) => p.call('persistUncertain', c),
          forget: (self, c) => {
            expect(self).toBe(plain);
            p.call('forget', c);
          },
        }, (e) => pErrors.push(e));

        /** What is compared after each event: status, action calls, errors, and (unless the status is
         *  'error', then the error) the state, context and which states it matches. One expect() for
         *  all of it: one per field cost 97,000 calls of ~15 us, a third of the file's CPU. */
        const view = (s: ReturnType<typeof plain.getSnapshot> | ReturnType<typeof actor.getSnapshot>, calls: string[], errors: unknown[]) => ({
          status: s.status, calls, errors: errors.map(String),
          ...(s.status === 'error'
            ? { error: String(s.error) }
            : { value: s.value, context: s.context, matches: (['new', 'sent', 'result', 'uncertain', 'discarded', 'recovering'] as const).map((m) => [m, s.matches(m)]) }),
        });
        const compare = () => {
          expect(view(plain.getSnapshot(), p.calls, pErrors)).toEqual(view(actor.getSnapshot(), x.calls, xErrors));
        };
        compare();
        for (const ev of events) {
          if (ev.type === 'stop') {
            actor.stop();
            plain.stop();
          } else {
            // An actor that is not running ignores events (xstate warns about each on the console).
            if (actor.getSnapshot().status === 'active') actor.send(ev);
            plain.send(ev);
          }
          compare();
        }
        for (const s of selves) expect(s).toBe(actor);
      }),
      { numRuns: 2_000 },
    );
    // Pure CPU (~4-5 s of it): under other work it got 5 s of CPU in 36 s of wall and failed on the 20 s
    // default (npm test at load 25). A bound for a hang, not for the machine's speed.
  }, 120_000);
});
