// A fault's count shared by several simulators (the gateway's shards, one per thread, given the
// same Int32 over a SharedArrayBuffer): together they take exactly `count` trades, in any order,
// and each one's list says what is left; without it each took its own `count`.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FaultController } from '../../src/sim/faults.js';

describe('a shared fault count', () => {
  it('is taken `count` times in all by the simulators that share it, whichever asks', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 6 }), fc.array(fc.nat(2), { maxLength: 20 }), (count, asks) => {
      const shared = new Int32Array(new SharedArrayBuffer(4)).fill(count);
      const sims = [0, 1, 2].map(() => new FaultController(1, () => 1_000));
      for (const f of sims) f.set({ server: 'S', kind: 'reject', count }, shared);
      const taken = asks.map((i) => sims[i]!.tradeFault('S', 'L') === 'reject');
      const left = Math.max(0, count - asks.length);
      expect({ taken: taken.filter(Boolean).length, lists: sims.map((f) => f.list().map((x) => x.remaining)) })
        .toEqual({ taken: Math.min(count, asks.length), lists: sims.map(() => (left > 0 ? [left] : [])) });
      // The firsts are taken, then none.
      expect(taken).toEqual(asks.map((_, i) => i < count));
    }));
  });

  it('unshared, each simulator counts its own (a fault set in one shard: an account fault)', () => {
    const sims = [0, 1].map(() => new FaultController(1, () => 1_000));
    for (const f of sims) f.set({ server: 'S', kind: 'reject', count: 1 });
    expect(sims.map((f) => f.tradeFault('S', 'L'))).toEqual(['reject', 'reject']);
  });
});
