// Bars in the hour a server clock repeats (DST ends: US rule 1st Sunday of November 06:00 UTC,
// server clock 09:00 -> 08:00). 24/7 symbols (BTCUSD) tick through it.
import { describe, expect, it } from 'vitest';
import { ServerClock } from '../../src/market/serverClock.js';
import type { ServerTimeZone } from '../../src/market/server.js';
import { TIMEFRAMES } from '../../src/market/timeframes.js';
import { barRangeUtc } from '../../src/market/bars.js';
import { makeSim } from '../helpers/sim-helpers.js';

const NY_CLOSE: ServerTimeZone = { description: 'GMT+2/+3 US', standardOffsetMinutes: 120, dst: 'US' };
const EU: ServerTimeZone = { description: 'GMT+2/+3 EU', standardOffsetMinutes: 120, dst: 'EU' };
const MIN = 60_000;
const FALL_BACK_US = Date.UTC(2026, 10, 1, 6, 0);
const FALL_BACK_EU = Date.UTC(2026, 9, 25, 1, 0);

describe('bars across the repeated hour of a DST fall-back', () => {
  for (const [name, tz, switchAt] of [['US', NY_CLOSE, FALL_BACK_US], ['EU', EU, FALL_BACK_EU]] as const) {
    it(`${name}: the bar of an instant contains it and is the bar forward iteration reaches`, () => {
      const clock = new ServerClock(tz);
      for (const tf of TIMEFRAMES) {
        // Forward iteration, as PriceHistory and live bars walk: from each bar's end to the next.
        let [s, e] = barRangeUtc(tf, switchAt - 3 * 60 * MIN, clock);
        while (s < switchAt + 2 * 60 * MIN) {
          for (const u of [s, e - 1, Math.floor((s + e) / 2)]) {
            const r = barRangeUtc(tf, u, clock);
            expect(r[0] <= u && u < r[1], `${tf} ${new Date(u).toISOString()} in [${new Date(r[0]).toISOString()}, ${new Date(r[1]).toISOString()})`).toBe(true);
            expect(r).toEqual([s, e]);
          }
          [s, e] = barRangeUtc(tf, e, clock);
        }
      }
    });
  }

  it('P4 QuoteHistory from inside the repeated hour ends with the bars PriceHistory shows up to then', () => {
    const { sim } = makeSim({ t0: FALL_BACK_US + 40 * MIN });
    const m = sim.server('Sim-P5-Demo')!.market;
    const btc = m.bySymbol.get('BTCUSD')!;
    const from = FALL_BACK_US + 30 * MIN; // 06:30 UTC, server 08:30 for the second time
    for (const tf of ['M1', 'M5', 'M15'] as const) {
      const back = m.quoteHistory(btc, tf, from, 20);
      const fwd = m.priceHistory(btc, tf, from - 6 * 60 * MIN, from + 1);
      expect(back.length).toBe(20);
      expect(back.map((c) => c.time)).toEqual(fwd.slice(-20).map((c) => c.time));
      expect(back.at(-1)!.time * 1000).toBeLessThanOrEqual(from);
    }
  });
});
