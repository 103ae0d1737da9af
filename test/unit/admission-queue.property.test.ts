// AdmissionQueue (src/util/admissionQueue.ts), the pacing of broker logins on a node
// (ACCOUNT_CREATION_CONCURRENCY): whatever tasks arrive and end in whatever order, at most `limit`
// run at once, at most `maxQueued` wait, tasks start in the order they arrived, one more than that
// is refused at once (and never runs), a task that fails gives its place on, and 0 bounds nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AdmissionQueue } from '../../src/util/admissionQueue.js';

const flush = () => new Promise<void>((r) => setImmediate(r));
const refusal = new Error('queue full');

type Op = { t: 'arrive' } | { t: 'end'; which: number; fail: boolean };
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ t: 'arrive' as const }),
  fc.record({ t: fc.constant('end' as const), which: fc.nat(20), fail: fc.boolean() }),
);

describe('AdmissionQueue', () => {
  it('runs at most limit tasks, keeps at most maxQueued waiting, starts them in arrival order, refuses the rest at once', async () => {
    await fc.assert(fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 4 }), fc.array(op, { maxLength: 60 }), async (limit, maxQueued, ops) => {
      const q = new AdmissionQueue(limit, maxQueued, () => refusal);
      const started: number[] = [];
      const running = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
      const refused: number[] = [];
      const settled: number[] = [];
      /** What a model of the queue expects: the ids admitted (running or waiting), in arrival order. */
      let admitted: number[] = [];
      let n = 0;
      for (const o of ops) {
        if (o.t === 'arrive') {
          const id = n++;
          const full = admitted.length >= limit + maxQueued;
          void q.run(() => new Promise<void>((resolve, reject) => {
            started.push(id);
            running.set(id, { resolve, reject });
          })).then(() => settled.push(id), (e: Error) => (e === refusal ? refused.push(id) : settled.push(id)));
          if (!full) admitted.push(id);
          await flush();
          if (full) expect(refused).toContain(id);
        } else {
          const ids = [...running.keys()];
          if (ids.length === 0) continue;
          const id = ids[o.which % ids.length]!;
          const r = running.get(id)!;
          running.delete(id);
          if (o.fail) r.reject(new Error('task failed'));
          else r.resolve();
          admitted = admitted.filter((x) => x !== id);
          await flush();
        }
        // The first `limit` admitted run; the rest wait, in the order they came.
        expect([...running.keys()].sort((a, b) => a - b)).toEqual(admitted.slice(0, limit).sort((a, b) => a - b));
        expect(q.state).toEqual({ active: Math.min(limit, admitted.length), queued: Math.max(0, admitted.length - limit) });
        expect(started).toEqual([...started].sort((a, b) => a - b));
        expect(started.some((id) => refused.includes(id))).toBe(false);
      }
    }), { numRuns: 200 });
  });

  it('limit 0 bounds nothing: every task runs at once', async () => {
    const q = new AdmissionQueue(0, 0, () => refusal);
    let running = 0;
    const ends: (() => void)[] = [];
    const all = Array.from({ length: 50 }, () => q.run(() => new Promise<void>((r) => {
      running++;
      ends.push(r);
    })));
    await flush();
    expect(running).toBe(50);
    for (const e of ends) e();
    await Promise.all(all);
  });
});
