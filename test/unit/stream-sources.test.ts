// The shard side of a near source (src/runtime/hosts/streamSources.ts, through the stream host) with
// a scripted account runtime: an account running here on the asked server subscribes the symbol as
// holder 'near' and forwards its ticks keyed by that server; anything else is refused; an unsource
// (or the account's release) stops it, including one that arrives while the account is looked up.
import { describe, expect, it } from 'vitest';
import type { Tick } from '../../src/market/server.js';
import { STREAM_EVENT, type TickEventData } from '../../src/runtime/hosts/streamCommands.js';
import { scriptedRuntime, streamHostOver } from '../helpers/streamHost.js';

function setup() {
  const calls: string[] = [];
  const conn = {
    subscribe: async (s: readonly string[]) => void calls.push(`sub ${s.join(',')}`),
    unsubscribe: async (s: readonly string[]) => void calls.push(`unsub ${s.join(',')}`),
  };
  const { rt, fire, listeners } = scriptedRuntime('y', conn, (_ms, owner) => calls.push(`as ${owner}`));
  let lookup: Promise<void> = Promise.resolve();
  const { host, events } = streamHostOver([rt], {
    ensure: async (id: string) => {
      await lookup;
      if (id !== 'y') throw new Error('account not found');
      return rt;
    },
  });
  const h = host.handlers;
  const tick = (symbol: string, t: number): Tick => ({ symbol, bid: 1, ask: 2, timeMsc: t } as Tick);
  const ticks = () => events.filter((e) => e.kind === STREAM_EVENT.tick).map((e) => [(e.data as TickEventData).server, (e.data as TickEventData).tick.symbol, (e.data as TickEventData).tick.timeMsc]);
  return {
    host, fire, tick, ticks, calls, listeners,
    source: (accountId: string, server: string, symbol: string) => h['stream.source']!({ accountId, server, symbol }),
    unsource: (accountId: string, symbol: string) => h['stream.unsource']!({ accountId, symbol }),
    holdLookup: () => {
      let release!: () => void;
      lookup = new Promise((r) => (release = r));
      return () => { lookup = Promise.resolve(); release(); };
    },
  };
}

const settle = () => new Promise((r) => setTimeout(r, 10));

describe('near source, shard side', () => {
  it('subscribes as holder near and forwards the symbol\'s ticks keyed by the server; others are not forwarded', async () => {
    const s = setup();
    expect(await s.source('y', 'Fake-P5', 'EURUSD')).toStrictEqual({ ok: true });
    await settle();
    expect(s.calls).toStrictEqual(['as near', 'sub EURUSD']);
    s.fire({ type: 'tick', tick: s.tick('EURUSD', 1) });
    s.fire({ type: 'tick', tick: s.tick('GBPUSD', 2) });
    expect(s.ticks()).toStrictEqual([['Fake-P5', 'EURUSD', 1]]);
  });

  it('refuses an account not running here or on another server, and holds nothing for it', async () => {
    const s = setup();
    expect(await s.source('x', 'Fake-P5', 'EURUSD')).toStrictEqual({ ok: false });
    expect(await s.source('y', 'Other', 'EURUSD')).toStrictEqual({ ok: false });
    await settle();
    expect(s.calls).toStrictEqual([]);
    expect(s.listeners.size).toBe(0);
  });

  it('an unsource stops the ticks and lets go as holder near; one that comes while the account is looked up wins', async () => {
    const s = setup();
    await s.source('y', 'Fake-P5', 'EURUSD');
    await settle();
    s.unsource('y', 'EURUSD');
    await settle();
    expect(s.calls).toStrictEqual(['as near', 'sub EURUSD', 'as near', 'unsub EURUSD']);
    s.fire({ type: 'tick', tick: s.tick('EURUSD', 3) });
    expect(s.ticks()).toStrictEqual([]);
    expect(s.listeners.size).toBe(0);

    const release = s.holdLookup();
    const pending = s.source('y', 'Fake-P5', 'GBPUSD');
    s.unsource('y', 'GBPUSD');
    release();
    expect(await pending).toStrictEqual({ ok: true });
    await settle();
    expect(s.calls.slice(4)).toStrictEqual([]);
    s.fire({ type: 'tick', tick: s.tick('GBPUSD', 4) });
    expect(s.ticks()).toStrictEqual([]);
  });

  it('subscribes again at each reconnect; the account released, nothing more is forwarded', async () => {
    const s = setup();
    s.fire({ type: 'phase', phase: 'reconnecting' });
    await s.source('y', 'Fake-P5', 'EURUSD');
    await settle();
    expect(s.calls).toStrictEqual([]); // not connected: at the next 'connected'
    s.fire({ type: 'phase', phase: 'connected' });
    await settle();
    expect(s.calls).toStrictEqual(['as near', 'sub EURUSD']);
    s.host.release!(new Set(['y']));
    s.fire({ type: 'tick', tick: s.tick('EURUSD', 5) });
    expect(s.ticks()).toStrictEqual([]);
  });
});
