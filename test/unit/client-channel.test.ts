// The SDK's frame channel (src/client/queue.ts), what `stream.on(...)` and `for await` read: a
// consumer that adds its callbacks late (a stream made, then an await, then `on(...)`) still gets
// every frame that came meanwhile, in order and once; an iterator gets them instead when one runs.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameChannel, LATEST_MARKET_DATA } from '../../src/client/queue.js';

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

// A `for await` slower than the stream: latest-value frames waiting in the buffer are replaced by a
// newer one of their topic (found driving a bot against a gateway: reading 10 frames/s of a stream
// sending ~40, the quote a bot acted on was 20 s old after 24 s and getting older, its buffer 986
// frames and growing; the gateway coalesces such a socket itself, but the SDK read everything into
// its own buffer first).
describe('FrameChannel, coalescing for a slow iterator', () => {
  type M = { type: 'QUOTE' | 'CANDLE' | 'TRADE' | 'HEARTBEAT'; n: number; data: { symbol?: string; timeframe?: string; closed?: boolean } };
  type Op = { kind: 'push'; frame: Omit<M, 'n'> } | { kind: 'read' };
  const frame: fc.Arbitrary<Omit<M, 'n'>> = fc.oneof(
    { weight: 6, arbitrary: fc.record({ type: fc.constant('QUOTE' as const), data: fc.record({ symbol: fc.constantFrom('A', 'B', 'C') }) }) },
    { weight: 3, arbitrary: fc.record({ type: fc.constant('CANDLE' as const), data: fc.record({ symbol: fc.constantFrom('A', 'B'), timeframe: fc.constantFrom('M1', 'H1'), closed: fc.boolean() }) }) },
    { weight: 2, arbitrary: fc.record({ type: fc.constant('TRADE' as const), data: fc.constant({}) }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('HEARTBEAT' as const), data: fc.constant({}) }) },
  );
  const op: fc.Arbitrary<Op> = fc.oneof(
    { weight: 5, arbitrary: fc.record({ kind: fc.constant('push' as const), frame }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('read' as const) }) },
  );
  const topic = (f: M) => (f.type === 'QUOTE' ? `q${f.data.symbol}` : f.type === 'CANDLE' ? `c${f.data.symbol}${f.data.timeframe}` : undefined);
  const replaceable = (f: M) => f.type === 'QUOTE' || (f.type === 'CANDLE' && f.data.closed !== true);

  it('reads what a model buffer holding one replaceable frame per topic gives: every TRADE, closed bar and heartbeat once, in order, the newest of each topic', async () => {
    await fc.assert(fc.asyncProperty(fc.array(op, { maxLength: 400 }), async (ops) => {
      const channel = new FrameChannel<M>(() => undefined, () => undefined, LATEST_MARKET_DATA);
      const it = channel[Symbol.asyncIterator]();
      const reads: Array<Promise<IteratorResult<M>>> = [];
      // The model: frames pushed and not read yet, an older replaceable frame of a topic removed when
      // a newer one of that topic comes; reads waiting take the next push directly.
      const model: M[] = [];
      const expected: number[] = [];
      let waiting = 0;
      let dropped = 0;
      let n = 0;
      for (const o of ops) {
        if (o.kind === 'read') {
          reads.push(it.next());
          const f = model.shift();
          if (f) expected.push(f.n);
          else waiting++;
          continue;
        }
        const f: M = { ...o.frame, n: ++n };
        channel.push(f);
        if (waiting > 0) {
          waiting--;
          expected.push(f.n);
          continue;
        }
        const t = topic(f);
        const older = t === undefined ? -1 : model.findIndex((m) => topic(m) === t && replaceable(m));
        if (older >= 0) {
          model.splice(older, 1);
          dropped++;
        }
        model.push(f);
      }
      channel.end();
      for (let r = await it.next(); !r.done; r = await it.next()) reads.push(Promise.resolve(r));
      const got = (await Promise.all(reads)).filter((r) => !r.done).map((r) => r.value.n);
      expect(got).toEqual([...expected, ...model.map((m) => m.n)]);
      expect(channel.coalesced).toBe(dropped);
    }), { numRuns: 300 });
  });

  it('a stalled reader holds one quote per symbol, not every quote since it stalled', async () => {
    const channel = new FrameChannel<M>(() => undefined, () => undefined, LATEST_MARKET_DATA);
    const it = channel[Symbol.asyncIterator]();
    for (let n = 1; n <= 10_000; n++) channel.push({ type: 'QUOTE', n, data: { symbol: n % 2 ? 'A' : 'B' } });
    expect((channel as unknown as { buffer: unknown[] }).buffer.length).toBeLessThan(200);
    expect((await it.next()).value).toMatchObject({ n: 9_999 });
    expect((await it.next()).value).toMatchObject({ n: 10_000 });
    expect(channel.coalesced).toBe(9_998);
  });

  it('without coalescing (the stream\'s coalesce: false) every frame is kept', async () => {
    const channel = new FrameChannel<M>(() => undefined);
    const it = channel[Symbol.asyncIterator]();
    for (let n = 1; n <= 5; n++) channel.push({ type: 'QUOTE', n, data: { symbol: 'A' } });
    for (let n = 1; n <= 5; n++) expect((await it.next()).value).toMatchObject({ n });
  });
});
