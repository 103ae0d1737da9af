// Shard side of /v1/stream (src/runtime/hosts/streams.ts) with a scripted account runtime: what it
// forwards to the main thread around an upstream outage. A bar that ended while the connection was
// down had its close (the first tick of the next bar) at the broker but not here: without care the
// bar in progress at the drop never got its `closed:true` frame.
import { describe, expect, it } from 'vitest';
import type { AccountEvent } from '../../src/runtime/hosts/accountRegistry.js';
import type { Candle, CandleEvent, Timeframe } from '../../src/market/timeframes.js';
import { STREAM_EVENT, type CandleEventData } from '../../src/runtime/hosts/streamCommands.js';
import type { ShardTiming } from '../../src/runtime/settings.js';
import { until } from '../helpers/until.js';
import { scriptedRuntime, streamHostOver } from '../helpers/streamHost.js';

/** The host's clock, still in the middle of a minute: which bar is "in progress" cannot change
 *  during a test (with the system clock, a minute turning mid-test on a slow run moved it). */
const NOW_MS = Math.floor(Date.now() / 60_000) * 60_000 + 30_000;
const clock = { now: () => NOW_MS };

const candle = (time: number, close: number, ticks: number): Candle =>
  ({ time, serverTime: time, open: 1, high: Math.max(1, close), low: Math.min(1, close), close, ticks, volume: ticks });

function setup(history: (symbol: string, tf: Timeframe, fromMs: number, toMs: number) => Candle[], timing: Partial<ShardTiming> = {}) {
  /** Each wait for the connection the host asked for: its bound and the holder it asked as. */
  const waits: Array<[number | undefined, string | undefined]> = [];
  const conn = {
    symbol: async () => ({ name: 'EURUSD' }),
    subscribe: async () => undefined,
    subscribeCandles: async () => undefined,
    unsubscribe: async () => undefined,
    unsubscribeCandles: async () => undefined,
    quote: async () => null,
    priceHistory: async (symbol: string, tf: Timeframe, fromMs: number, toMs: number) => history(symbol, tf, fromMs, toMs),
  };
  const { rt, fire } = scriptedRuntime('acc', conn, (ms, owner) => waits.push([ms, owner]));
  const { host, events } = streamHostOver([rt], { clock, timing });
  const candles = () => events.filter((e) => e.kind === STREAM_EVENT.candle).map((e) => (e.data as CandleEventData).candle);
  return { host, fire, candles, waits };
}

const settle = () => new Promise((r) => setTimeout(r, 20));

describe('stream host: candles around an upstream outage', () => {
  it('the bar in progress at the drop, finished during the outage, is forwarded closed (from history) before the next bar', async () => {
    const min = Math.floor(NOW_MS / 60_000) * 60; // the current M1 bar (UTC seconds)
    const barX = min - 120; // in progress at the drop
    const barY = min - 60; // wholly inside the outage
    const { host, fire, candles } = setup((_s, _tf, fromMs) => [candle(barX, 1.5, 60), candle(barY, 1.6, 60), candle(min, 1.7, 5)]
      .filter((c) => c.time * 1000 >= fromMs));
    await host.handlers['stream.open']!({ accountId: 'acc' } as never);
    await host.handlers['stream.sub']!({ accountId: 'acc', symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 } as never);
    const ev = (time: number, ticks: number, closed: boolean): AccountEvent =>
      ({ type: 'candle', candle: { symbol: 'EURUSD', timeframe: 'M1', candle: candle(time, 1.2, ticks), closed } as CandleEvent });
    fire(ev(barX, 10, false));
    fire({ type: 'phase', phase: 'reconnecting' });
    fire({ type: 'phase', phase: 'connected' });
    fire(ev(min, 6, false)); // the first update after the reconnect, before history answered
    // The closed bars come once history answered: awaited, not a 20 ms sleep a loaded machine outlasts.
    await until(() => candles().length >= 4, 'the closed bars from history');
    await settle();
    const got = candles().map((c) => [c.candle.time, c.closed, c.candle.ticks]);
    expect(got).toEqual([[barX, false, 10], [barX, true, 60], [barY, true, 60], [min, false, 6]]);
  });

  it('a short outage inside the bar forwards nothing extra (its close comes as usual)', async () => {
    const min = Math.floor(NOW_MS / 60_000) * 60 + 60; // a bar that has certainly not ended during the test
    let asked = 0;
    const { host, fire, candles } = setup(() => {
      asked++;
      return [];
    });
    await host.handlers['stream.open']!({ accountId: 'acc' } as never);
    await host.handlers['stream.sub']!({ accountId: 'acc', symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 } as never);
    const ev = (ticks: number): AccountEvent =>
      ({ type: 'candle', candle: { symbol: 'EURUSD', timeframe: 'M1', candle: candle(min, 1.2, ticks), closed: false } as CandleEvent });
    fire(ev(3));
    fire({ type: 'phase', phase: 'reconnecting' });
    fire({ type: 'phase', phase: 'connected' });
    fire(ev(7));
    await settle();
    expect(candles().map((c) => [c.candle.time, c.closed, c.candle.ticks])).toEqual([[min, false, 3], [min, false, 7]]);
    expect(asked).toBe(0);
  });
});

describe('stream host: a stale bar of an earlier subscription', () => {
  it('is not taken for the bar in progress at a later drop (no old bars forwarded as closed)', async () => {
    const min = Math.floor(NOW_MS / 60_000) * 60;
    let asked = 0;
    const { host, fire, candles } = setup(() => {
      asked++;
      return [candle(min - 600, 1.1, 60)];
    });
    await host.handlers['stream.open']!({ accountId: 'acc' } as never);
    await host.handlers['stream.sub']!({ accountId: 'acc', symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 } as never);
    fire({ type: 'candle', candle: { symbol: 'EURUSD', timeframe: 'M1', candle: candle(min - 600, 1.2, 4), closed: false } });
    await host.handlers['stream.unsub']!({ accountId: 'acc', symbol: 'EURUSD', timeframes: ['M1'] } as never);
    // Subscribed again much later; the connection drops before the topic's first update.
    await host.handlers['stream.sub']!({ accountId: 'acc', symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 } as never);
    fire({ type: 'phase', phase: 'reconnecting' });
    fire({ type: 'phase', phase: 'connected' });
    await settle();
    expect(asked).toBe(0);
    expect(candles().map((c) => [c.candle.time, c.closed])).toEqual([[min - 600, false]]);
  });
});

describe('stream host: its own broker upkeep waits SUBSCRIPTION_WAIT_MS for the connection', () => {
  it('the closed-candle recovery and the resubscribe after a reconnect, and the release after an unsub', async () => {
    const min = Math.floor(NOW_MS / 60_000) * 60;
    const { host, fire, waits } = setup(() => [candle(min - 120, 1.5, 60)], { subscriptionWaitMs: 345 });
    await host.handlers['stream.open']!({ accountId: 'acc' } as never);
    // A client's own wait: the bound it sent.
    await host.handlers['stream.sub']!({ accountId: 'acc', symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 5_000 } as never);
    expect(waits).toEqual([[5_000, 'stream']]);
    fire({ type: 'candle', candle: { symbol: 'EURUSD', timeframe: 'M1', candle: candle(min - 120, 1.2, 10), closed: false } });
    fire({ type: 'phase', phase: 'reconnecting' });
    fire({ type: 'phase', phase: 'connected' });
    await until(() => waits.length >= 3, 'the recovery and the resubscribe to wait for the connection');
    await host.handlers['stream.unsub']!({ accountId: 'acc', symbol: 'EURUSD' } as never);
    await until(() => waits.length >= 4, 'the release to wait for the connection');
    await settle(); // and nothing more
    // Recovery of the bar that closed meanwhile, resubscribe, release: the setting, not a fixed second.
    expect(waits.slice(1)).toEqual([[345, 'stream'], [345, 'stream'], [345, 'stream']]);
  });
});
