// The SDK's frame channel (src/client/queue.ts), what `stream.on(...)` and `for await` read: a
// consumer that adds its callbacks late (a stream made, then an await, then `on(...)`) still gets
// every frame that came meanwhile, in order and once; an iterator gets them instead when one runs.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameChannel } from '../../src/client/queue.js';

type F = { type: string; n: number };
type Step = { kind: 'push'; type: 'A' | 'B' } | { kind: 'listen'; type: 'A' | 'B' | '*' } | { kind: 'tick' };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('push' as const), type: fc.constantFrom('A' as const, 'B' as const) }),
  fc.record({ kind: fc.constant('listen' as const), type: fc.constantFrom('A' as const, 'B' as const, '*' as const) }),
  fc.record({ kind: fc.constant('tick' as const) }),
);

describe('FrameChannel, callbacks added late', () => {
  it('a callback gets every frame of its type once, in order, from the first it was there for (and those before, if no callback had taken them)', async () => {
    await fc.assert(fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
      const taken: number[] = [];
      const channel = new FrameChannel<F>(() => undefined, (f) => taken.push(f.n));
      const got = new Map<string, number[]>();
      let n = 0;
      let listening = false;
      for (const s of steps) {
        if (s.kind === 'push') channel.push({ type: s.type, n: ++n });
        else if (s.kind === 'tick') await Promise.resolve();
        else {
          const mine: number[] = [];
          got.set(`${s.type}#${got.size}`, mine);
          channel.onFrame(s.type, (f) => mine.push(f.n));
          listening = true;
        }
      }
      await Promise.resolve();
      // Every frame reached the consumer once a callback existed, in the order pushed.
      expect(taken).toEqual(listening ? Array.from({ length: n }, (_, i) => i + 1) : []);
      for (const seq of got.values()) {
        expect([...seq].sort((a, b) => a - b)).toEqual(seq);
        expect(new Set(seq).size).toBe(seq.length);
      }
    }), { numRuns: 300 });
  });

  it('an iterator started in the same turn as the callbacks takes the buffered frames; the callbacks see the later ones', async () => {
    const channel = new FrameChannel<F>(() => undefined);
    channel.push({ type: 'A', n: 1 });
    const cb: number[] = [];
    channel.onFrame('A', (f) => cb.push(f.n));
    const it = channel[Symbol.asyncIterator]();
    await Promise.resolve();
    channel.push({ type: 'A', n: 2 });
    expect((await it.next()).value).toEqual({ type: 'A', n: 1 });
    expect((await it.next()).value).toEqual({ type: 'A', n: 2 });
    expect(cb).toEqual([2]);
  });
});
