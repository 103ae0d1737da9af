// Shard side of /v1/stream (src/runtime/hosts/streams.ts) with two scripted account runtimes of one
// server: account x streams EURUSD to a socket, account y is a near source of it (cluster mode).
// Both sessions deliver the same ticks; the shard forwards each once. Two ticks in one millisecond,
// delivered by x then by y, used to go out A, B, A, B (each copy compared with the last tick only):
// a stale quote last but one. Now A, B (src/market/tickMerge.ts).
import { describe, expect, it } from 'vitest';
import type { Tick } from '../../src/market/server.js';
import { STREAM_EVENT, type TickEventData } from '../../src/runtime/hosts/streamCommands.js';
import { scriptedRuntime, streamHostOver } from '../helpers/streamHost.js';

const conn = { symbol: async () => ({ name: 'EURUSD' }), subscribe: async () => undefined, unsubscribe: async () => undefined, quote: async () => null };

function runtime(accountId: string) {
  const { rt, fire } = scriptedRuntime(accountId, conn);
  const tick = (bid: number, t: number) => fire({ type: 'tick', tick: { symbol: 'EURUSD', bid, ask: bid + 1, timeMsc: t } as Tick });
  return { rt, tick };
}

describe('stream host: copies of one tick sequence from two sessions', () => {
  it('forwards each tick of a millisecond once and in order, whichever session delivers it first', async () => {
    const x = runtime('x');
    const y = runtime('y');
    const { host, events } = streamHostOver([x.rt, y.rt]);
    await host.handlers['stream.open']!({ accountId: 'x' } as never);
    await host.handlers['stream.sub']!({ accountId: 'x', symbol: 'EURUSD', timeframes: [], timeoutMs: 1_000 } as never);
    expect(await host.handlers['stream.source']!({ accountId: 'y', server: 'Fake-P5', symbol: 'EURUSD' })).toStrictEqual({ ok: true });
    await new Promise((r) => setTimeout(r, 10));

    x.tick(1, 100); // A
    x.tick(2, 100); // B, the same millisecond
    y.tick(1, 100); // y's copies, later
    y.tick(2, 100);
    y.tick(1, 100); // then a return to A within the millisecond: y first this time
    x.tick(1, 100);
    x.tick(3, 101);
    y.tick(3, 101);
    const out = events.filter((e) => e.kind === STREAM_EVENT.tick).map((e) => {
      const { tick } = e.data as TickEventData;
      return [tick.timeMsc, tick.bid];
    });
    expect(out).toStrictEqual([[100, 1], [100, 2], [100, 1], [101, 3]]);
  });
});
