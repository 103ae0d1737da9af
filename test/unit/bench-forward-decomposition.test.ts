// bench/cluster.ts's split of forwarded - local (router level) into the owner's wake-up, one NATS
// round trip and the rest, and the 1.5x budget the round trip is measured against.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { describeForwarding, forwardDecomposition, type RouterFigures } from '../../bench/lib/forwardDecomposition.js';
import type { HttpOrderFigures } from '../../bench/lib/clusterHttpOrders.js';

const us = fc.double({ min: 1, max: 100_000, noNaN: true });
const pair = fc.record({ p50: us, p99: us });
const figures = fc.record({ local: pair, localAfterIdle: pair, forwarded: pair, natsRoundTrip: pair });

describe('forwardDecomposition', () => {
  it('splits forwarded - local into wake-up + round trip + rest, at p50 and p99', () => {
    fc.assert(fc.property(figures, (f: RouterFigures) => {
      const d = forwardDecomposition(f);
      for (const q of ['p50', 'p99'] as const) {
        const e = d[q];
        // Each part is rounded on its own: the sum may differ from the rounded whole by 1 per part.
        expect(Math.abs(e.ownerWake + e.natsRoundTrip + e.rest - e.forwardedMinusLocal)).toBeLessThanOrEqual(2);
        expect(Math.abs(e.forwardedMinusLocalMinusRtt - (e.forwardedMinusLocal - e.natsRoundTrip))).toBeLessThanOrEqual(2);
        expect(e.budgetAt1_5x).toBe(Math.round(f.local[q] / 2));
        expect(e.rttOverBudget).toBeCloseTo(f.natsRoundTrip[q] / (f.local[q] / 2), 2);
      }
    }));
  });

  it('says which ratio is over HTTP and which at router level', () => {
    const f: RouterFigures = {
      local: { p50: 266, p99: 1360 }, localAfterIdle: { p50: 340, p99: 1500 },
      forwarded: { p50: 539, p99: 2436 }, natsRoundTrip: { p50: 133, p99: 400 },
    };
    const http = { local: { p50: 2000, p99: 4000 }, forwarded: { p50: 2600, p99: 5200 } } as HttpOrderFigures;
    const text = describeForwarding(f, forwardDecomposition(f), http);
    expect(text).toContain('over HTTP (what a client sees');
    expect(text).toContain('x1.3 / x1.3');
    expect(text).toContain('router level (AccountRouter.call; no HTTP, no PostgreSQL)');
    expect(text).toContain('x2.03 / x1.79 of local');
    // 539 - 266 = 273 = 74 + 133 + 66; 1.5x allows 133, the round trip takes all of it.
    expect(text).toContain('forwarded - local 273 = owner wake-up 74 + NATS round trip 133 + rest 66');
    expect(text).toContain('1.5x allows 133 over local, the round trip alone is 1 of that');
  });
});
