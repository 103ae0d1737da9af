// The `mute` fault: a login's session stays connected (requests answer, account events arrive)
// but no market data reaches it, no ticks and no candles, for durationMs from when it is set;
// then its existing subscriptions deliver again with no resubscribe. A real broker session that
// stays up and silently stops quoting; what a node has to notice as a stalled quote source.
import { describe, expect, it } from 'vitest';
import type { CandleEvent } from '../../src/market/timeframes.js';
import type { Deal } from '../../src/market/orders.js';
import { faultSpecSchema } from '../../src/sim/config.js';
import { FaultController } from '../../src/sim/faults.js';
import { connect, makeSim } from '../helpers/sim-helpers.js';

describe('simulator fault: mute', () => {
  it('stops ticks and candles of one login for durationMs; another login, requests and account events go on', async () => {
    const { sim, clock } = makeSim();
    const muted = await connect(sim, 'Sim-P5-Demo', '5001');
    const other = await connect(sim, 'Sim-P5-Demo', '5002');
    const ticks = { muted: 0, other: 0 };
    const candles: Record<'muted' | 'other', CandleEvent[]> = { muted: [], other: [] };
    const deals: Deal[] = [];
    muted.on('tick', () => ticks.muted++);
    other.on('tick', () => ticks.other++);
    muted.on('candle', (e) => candles.muted.push(e));
    other.on('candle', (e) => candles.other.push(e));
    muted.on('deal', (d) => deals.push(d));
    for (const c of [muted, other]) {
      await c.subscribe(['EURUSD']);
      await c.subscribeCandles('EURUSD', ['M1']);
    }
    const step = (ms: number) => {
      clock.advance(ms);
      sim.advance();
    };

    step(5_000);
    expect(ticks.muted).toBeGreaterThan(0);
    expect(candles.muted.length).toBeGreaterThan(0);

    // The exact call the cluster's stalled-source test makes.
    sim.faults.set({ server: 'Sim-P5-Demo', login: '5001', kind: 'mute', durationMs: 120_000 });
    const before = { ticks: { ...ticks }, candles: { muted: candles.muted.length, other: candles.other.length } };
    step(60_000);
    step(59_000);
    expect(ticks.muted).toBe(before.ticks.muted);
    expect(candles.muted.length).toBe(before.candles.muted);
    expect(ticks.other).toBeGreaterThan(before.ticks.other);
    expect(candles.other.length).toBeGreaterThan(before.candles.other);
    // Still connected: requests answer, trades execute and their account events arrive.
    expect(muted.state).toBe('connected');
    expect((await muted.quote('EURUSD'))?.bid).toBeGreaterThan(0);
    expect((await muted.accountSummary()).balance).toBeGreaterThan(0);
    const sent = await muted.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 });
    expect(sent.ok).toBe(true);
    await Promise.resolve();
    expect(deals.length).toBeGreaterThan(0);
    expect(sim.faults.list().map((f) => f.kind)).toEqual(['mute']);

    // Over: the same subscriptions deliver again, and the fault is gone.
    step(2_000);
    step(5_000);
    expect(ticks.muted).toBeGreaterThan(before.ticks.muted);
    expect(candles.muted.length).toBeGreaterThan(before.candles.muted);
    expect(sim.faults.list()).toEqual([]);
  });

  it('a server-wide mute silences every login of that server, none of another; clearing it ends it early', async () => {
    const { sim, clock } = makeSim();
    const p5 = await connect(sim, 'Sim-P5-Demo', '5101');
    const p4 = await connect(sim, 'Sim-P4-Demo', '4101');
    const ticks = { p5: 0, p4: 0 };
    p5.on('tick', () => ticks.p5++);
    p4.on('tick', () => ticks.p4++);
    await p5.subscribe(['EURUSD']);
    await p4.subscribe(['EURUSD']);
    sim.faults.set({ server: 'Sim-P5-Demo', kind: 'mute', durationMs: 600_000 });
    clock.advance(10_000);
    sim.advance();
    expect(ticks.p5).toBe(0);
    expect(ticks.p4).toBeGreaterThan(0);
    sim.faults.clear(undefined, 'Sim-P5-Demo');
    clock.advance(10_000);
    sim.advance();
    expect(ticks.p5).toBeGreaterThan(0);
  });

  it('muted(): false at once with no fault; per login and server; ends with durationMs', () => {
    let now = 1_000;
    const f = new FaultController(1, () => now);
    expect(f.muted('S', '1')).toBe(false);
    f.set({ server: 'S', kind: 'latency', latencyMs: 5 });
    expect(f.muted('S', '1')).toBe(false);
    f.set({ server: 'S', login: '1', kind: 'mute', durationMs: 100 });
    expect(f.muted('S', '1')).toBe(true);
    expect(f.muted('S', '2')).toBe(false);
    expect(f.muted('T', '1')).toBe(false);
    expect(f.dropRemaining('S', '1')).toBe(0);
    now = 1_099;
    expect(f.muted('S', '1')).toBe(true);
    now = 1_100;
    expect(f.muted('S', '1')).toBe(false);
    expect(f.list().map((x) => x.kind)).toEqual(['latency']);
  });

  it('a servers file may carry one (a standalone simulator takes its faults from there)', () => {
    expect(faultSpecSchema.parse({ kind: 'mute', login: '1001', durationMs: 30_000 })).toEqual({ kind: 'mute', login: '1001', durationMs: 30_000 });
  });

  it("a servers file's fault with a field of another kind is refused (it would be ignored), naming what the kind takes", () => {
    const r = faultSpecSchema.safeParse({ kind: 'mute', durationMs: 1000, count: 3 });
    expect(r.success).toBe(false);
    expect(r.error!.issues).toMatchObject([{ path: ['count'], message: 'not for mute (mute takes durationMs)' }]);
    expect(faultSpecSchema.safeParse({ kind: 'reject', probability: 0.1, latencyMs: 5 }).success).toBe(false);
    expect(faultSpecSchema.safeParse({ kind: 'unknownAfterSend', count: 1, lookupFailMs: 500, durationMs: 9000 }).success).toBe(true);
  });

  it("a servers file's fault needs what its kind needs, as the fault routes do (a drop without durationMs did nothing)", () => {
    const issues = (spec: object) => faultSpecSchema.safeParse(spec).error?.issues.map((i) => (i.path.length ? `${i.path.join('.')}: ${i.message}` : i.message));
    expect(issues({ kind: 'drop' })).toEqual(['durationMs: required for a drop']);
    expect(issues({ kind: 'latency' })).toEqual(['latencyMs: required for latency']);
    expect(issues({ kind: 'reject' })).toEqual(["reject needs 'count' or 'probability'"]);
    expect(issues({ kind: 'reject', count: 1, probability: 0.5 })).toEqual(["reject takes 'count' or 'probability', not both"]);
    expect(issues({ kind: 'unknownAfterSend', count: 1 })).toEqual(['lookupFailMs: required for unknownAfterSend']);
    expect(issues({ kind: 'reject', count: 1 })).toBeUndefined();
  });
});
