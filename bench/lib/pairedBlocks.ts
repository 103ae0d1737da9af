// bench/http.ts --sequential: idempotent orders and the floor measured in alternating blocks (floor
// then orders, then orders then floor, ...), so both see the same machine state; each pair gives its
// own ratio, and the pooled histograms give one over all blocks.
import { Histogram, type HistogramData } from './histogram.js';

export interface Block { latencyUs: { p50: number; p99: number }; hist: HistogramData }

/** Which of the pair runs first in pair `i`: ABBA, so a drift of the machine's state over the run
 *  falls on both sides alike. */
export const floorFirst = (i: number) => i % 2 === 0;

const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Where a side's tail begins: the pooled percentiles between p90 and p99.9. The floor's late
 *  wake-ups start near p99.5; the orders' start earlier, which is what puts their p99 in them
 *  (docs/orders-performance.md, "What the p99 is made of"). */
export const TAIL_PERCENTILES = [90, 95, 97, 98, 99, 99.5, 99.9] as const;
const tailOf = (h: Histogram) => Object.fromEntries(TAIL_PERCENTILES.map((q) => [`p${q}`, h.percentile(q)]));

export function pairedRatios(pairs: { floor: Block; orders: Block }[]) {
  if (pairs.length === 0) throw new Error('pairedRatios: no pairs');
  const each = pairs.map(({ floor, orders }) => ({
    floorUs: { p50: floor.latencyUs.p50, p99: floor.latencyUs.p99 },
    orderSendUs: { p50: orders.latencyUs.p50, p99: orders.latencyUs.p99 },
    overFloor: { p50: ratio(orders.latencyUs.p50, floor.latencyUs.p50), p99: ratio(orders.latencyUs.p99, floor.latencyUs.p99) },
  }));
  const pool = (side: 'floor' | 'orders') => {
    const h = new Histogram();
    for (const p of pairs) h.merge(p[side].hist);
    return h;
  };
  const floorHist = pool('floor');
  const ordersHist = pool('orders');
  const floor = floorHist.summary();
  const orders = ordersHist.summary();
  const p99s = each.map((e) => e.overFloor.p99);
  return {
    pairs: each,
    overFloorP99: { min: Math.min(...p99s), median: Math.round(median(p99s) * 1000) / 1000, max: Math.max(...p99s) },
    pooled: { floorUs: floor, orderSendUs: orders, overFloor: { p50: ratio(orders.p50, floor.p50), p99: ratio(orders.p99, floor.p99) } },
    tail: { floorUs: tailOf(floorHist), orderSendUs: tailOf(ordersHist) },
  };
}
