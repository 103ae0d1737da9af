import { describe, expect, it } from 'vitest';
import { fromServerTime, ServerClock, toServerTime, utcOffsetMinutes } from '../../src/market/serverClock.js';
import type { ServerTimeZone } from '../../src/market/server.js';
import { barRangeUtc } from '../../src/market/bars.js';
import { emptyOhlc } from '../../src/sim/feed.js';
import { TIMEFRAMES } from '../../src/market/timeframes.js';
import { makeSim, T0 } from '../helpers/sim-helpers.js';

const NY_CLOSE: ServerTimeZone = { description: 'GMT+2/+3 US', standardOffsetMinutes: 120, dst: 'US' };
const EU: ServerTimeZone = { description: 'GMT+2/+3 EU', standardOffsetMinutes: 120, dst: 'EU' };
const H = 3_600_000;

describe('server time zones', () => {
  it('switches with US DST (2nd Sunday of March 07:00 UTC, 1st Sunday of November 06:00 UTC)', () => {
    expect(utcOffsetMinutes(NY_CLOSE, Date.UTC(2026, 2, 8, 6, 59))).toBe(120);
    expect(utcOffsetMinutes(NY_CLOSE, Date.UTC(2026, 2, 8, 7, 0))).toBe(180);
    expect(utcOffsetMinutes(NY_CLOSE, Date.UTC(2026, 10, 1, 5, 59))).toBe(180);
    expect(utcOffsetMinutes(NY_CLOSE, Date.UTC(2026, 10, 1, 6, 0))).toBe(120);
  });
  it('switches with EU DST (last Sundays of March and October, 01:00 UTC)', () => {
    expect(utcOffsetMinutes(EU, Date.UTC(2026, 2, 29, 0, 59))).toBe(120);
    expect(utcOffsetMinutes(EU, Date.UTC(2026, 2, 29, 1, 0))).toBe(180);
    expect(utcOffsetMinutes(EU, Date.UTC(2026, 9, 25, 0, 59))).toBe(180);
    expect(utcOffsetMinutes(EU, Date.UTC(2026, 9, 25, 1, 0))).toBe(120);
  });
  it('round-trips server time and agrees with the cached clock', () => {
    const clock = new ServerClock(NY_CLOSE);
    for (let t = Date.UTC(2026, 0, 1); t < Date.UTC(2027, 0, 1); t += 7 * H + 13) {
      expect(clock.toServer(t)).toBe(toServerTime(t, NY_CLOSE));
      expect(fromServerTime(toServerTime(t, NY_CLOSE), NY_CLOSE)).toBe(t);
    }
  });
});

describe('candles on the server clock', () => {
  const clock = new ServerClock(NY_CLOSE);
  it('D1 opens at server midnight: 22:00 UTC in winter, 21:00 UTC in summer', () => {
    expect(barRangeUtc('D1', Date.UTC(2026, 10, 18, 12), clock)).toEqual([Date.UTC(2026, 10, 17, 22), Date.UTC(2026, 10, 18, 22)]);
    expect(barRangeUtc('D1', Date.UTC(2026, 6, 15, 12), clock)).toEqual([Date.UTC(2026, 6, 14, 21), Date.UTC(2026, 6, 15, 21)]);
  });
  it('W1 opens on Sunday server midnight and MN1 on the 1st', () => {
    const [w] = barRangeUtc('W1', Date.UTC(2026, 10, 18, 12), clock);
    expect(new Date(toServerTime(w, NY_CLOSE)).getUTCDay()).toBe(0);
    expect(toServerTime(w, NY_CLOSE) % (24 * H)).toBe(0);
    const [m] = barRangeUtc('MN1', Date.UTC(2026, 10, 18, 12), clock);
    // Server midnight of Nov 1 is still in US DST (+3): 21:00 UTC the day before.
    expect(m).toBe(Date.UTC(2026, 9, 31, 21));
  });
  it('history D1 bars carry server-midnight times and serverTime = time + offset', async () => {
    const { sim } = makeSim();
    const m = sim.server('Sim-P5-Demo')!.market;
    const bars = m.priceHistory(m.bySymbol.get('EURUSD')!, 'D1', T0 - 5 * 24 * H, T0);
    expect(bars.length).toBeGreaterThan(2);
    for (const b of bars) {
      expect((b.time * 1000) % (24 * H)).toBe(22 * H);
      expect(b.serverTime - b.time).toBe(7200);
    }
  });
  it('live bars equal bars recomputed from the pure feed, for every timeframe', () => {
    const { sim, clock } = makeSim();
    const m = sim.server('Sim-P5-Demo')!.market;
    const s = m.bySymbol.get('EURUSD')!;
    const bars = m.enableBars(s);
    for (let i = 0; i < 5; i++) {
      clock.advance(37_000);
      sim.advance();
      TIMEFRAMES.forEach((_, k) => {
        const ref = s.feed.aggregate(bars.start[k]!, m.now + 1, emptyOhlc());
        expect({ ...bars.bars[k]! }).toEqual(ref);
      });
    }
  });
});

describe('swap rollovers', () => {
  const clock = new ServerClock(NY_CLOSE);
  const toServer = (t: number) => clock.toServer(t);
  it('charges one night per server midnight Tue..Sat and three at the start of Thursday', async () => {
    const { swapNights } = await import('../../src/sim/accounting.js');
    // Monday 2026-11-16 12:00 UTC (14:00 server) -> Tuesday same time: one rollover.
    const mon = Date.UTC(2026, 10, 16, 12);
    expect(swapNights(mon, mon + 24 * H, toServer)).toBe(1);
    // Wednesday -> Thursday: triple.
    expect(swapNights(mon + 2 * 24 * H, mon + 3 * 24 * H, toServer)).toBe(3);
    // A full week Monday -> Monday: 1 + 1 + 3 + 1 + 1 = 7 (none at Sunday/Monday midnights).
    expect(swapNights(mon, mon + 7 * 24 * H, toServer)).toBe(7);
    // The rollover is at server midnight (22:00 UTC in winter), not UTC midnight.
    expect(swapNights(Date.UTC(2026, 10, 16, 21, 59), Date.UTC(2026, 10, 16, 22, 0), toServer)).toBe(1);
    expect(swapNights(Date.UTC(2026, 10, 16, 22, 0), Date.UTC(2026, 10, 16, 23, 59), toServer)).toBe(0);
  });
});

describe('swap on positions', () => {
  it('accrues at the rollover, counts in equity and is realized on the out deal', async () => {
    const { connect } = await import('../helpers/sim-helpers.js');
    const { sim, clock } = makeSim();
    const c = await connect(sim);
    const r = await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 1 });
    if (!r.ok) throw new Error(r.message);
    clock.advance(24 * H); // Wednesday 12:00 -> Thursday 12:00 UTC: the triple rollover
    sim.advance();
    const [p] = (await c.openedOrders()).positions;
    expect(p!.swap).toBeCloseTo(3 * -6.5, 6); // swapLong -6.5 points * 1e-5 * 100,000 * 1 lot
    const sum = await c.accountSummary();
    expect(sum.equity).toBeCloseTo(sum.balance + p!.profit + p!.swap, 6);
    const closed = await c.orderClose({ ticket: p!.ticket });
    expect(closed.ok && closed.deals[0]!.swap).toBeCloseTo(-19.5, 6);
  });
});
