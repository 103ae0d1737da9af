// Shard side of /v1/stream (src/runtime/hosts/streams.ts) with two scripted account runtimes of one
// server: account x streams EURUSD to a socket, account y is a near source of it (cluster mode).
// Both sessions deliver the same ticks; the shard forwards each once. Two ticks in one millisecond,
// delivered by x then by y, used to go out A, B, A, B (each copy compared with the last tick only):
// a stale quote last but one. Now A, B (src/market/tickMerge.ts).
import { describe, expect, it } from 'vitest';
import type { BrokerConnection } from '../../src/broker/types.js';
import type { ServerInfo, Tick } from '../../src/market/server.js';
import type { AccountEvent, AccountRuntime } from '../../src/runtime/hosts/accountRegistry.js';
import type { ShardContext } from '../../src/runtime/hosts/context.js';
import { STREAM_EVENT, type TickEventData } from '../../src/runtime/hosts/streamCommands.js';
import { createStreamHost } from '../../src/runtime/hosts/streams.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';
import { shardSettings } from '../../src/runtime/settings.js';

const SERVER: ServerInfo = { name: 'Fake-P5', platform: 'P5', build: 4620, company: 'x', timeZone: { description: 'UTC', standardOffsetMinutes: 0, dst: 'none' } };

function runtime(accountId: string) {
  const listeners = new Set<(ev: AccountEvent) => void>();
  const conn = {
    server: SERVER,
    symbol: async () => ({ name: 'EURUSD' }),
    subscribe: async () => undefined,
    unsubscribe: async () => undefined,
    quote: async () => null,
  } as unknown as BrokerConnection;
  const rt = {
    accountId, customerId: 'c', platform: 'P5', server: SERVER, serverKnown: true, phase: () => 'connected',
    whenConnected: async () => conn,
    on: (l: (ev: AccountEvent) => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    lastSummary: undefined,
    check: () => undefined,
  } as unknown as AccountRuntime;
  const tick = (bid: number, t: number) => {
    const ev: AccountEvent = { type: 'tick', tick: { symbol: 'EURUSD', bid, ask: bid + 1, timeMsc: t } as Tick };
    for (const l of listeners) l(ev);
  };
  return { rt, tick };
}

describe('stream host: copies of one tick sequence from two sessions', () => {
  it('forwards each tick of a millisecond once and in order, whichever session delivers it first', async () => {
    const events: ShardEvent[] = [];
    const x = runtime('x');
    const y = runtime('y');
    const byId = new Map([['x', x.rt], ['y', y.rt]]);
    const ctx = {
      shard: 0, shards: 1, log: { warn: () => undefined, info: () => undefined, error: () => undefined, debug: () => undefined },
      settings: shardSettings({}), clock: { now: () => Date.now() }, emit: (ev: ShardEvent) => events.push(ev), owns: () => true,
      accounts: { get: (id: string) => byId.get(id), ensure: async (id: string) => byId.get(id) },
    } as unknown as ShardContext;
    const host = createStreamHost(ctx);
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
