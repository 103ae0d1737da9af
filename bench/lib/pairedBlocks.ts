// Two paths measured in alternating blocks (base then other, then other then base, ...), so both
// see the same machine state: each pair of blocks gives its own ratio (other / base), the pooled
// histograms one over all blocks. bench/http.ts --sequential (the floor against idempotent orders)
// and bench/cluster.ts (local against forwarded OrderSend over HTTP, a quote's path on its owner
// against another node's: bench/lib/clusterHttpOrders.ts, clusterNearQuotes.ts).
import { Histogram, type HistogramData } from './histogram.js';

export interface Block { latencyUs: { p50: number; p99: number }; hist: HistogramData }

/** A block of `h`'s samples. */
export const blockOf = (h: Histogram): Block => ({ latencyUs: { p50: h.percentile(50), p99: h.percentile(99) }, hist: h.toJSON() });

/** Whether the base path runs first in pair `i`: ABBA, so a drift of the machine's state over the
 *  run falls on both sides alike. */
export const baseFirst = (i: number) => i % 2 === 0;

/** Pair `i`'s two blocks, run in its order (baseFirst). */
export async function runPair<T>(i: number, base: () => Promise<T>, other: () => Promise<T>): Promise<{ base: T; other: T }> {
  if (baseFirst(i)) {
    const b = await base();
    return { base: b, other: await other() };
  }
  const o = await other();
  return { base: await base(), other: o };
}

const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const spread = (xs: number[]) => ({ min: Math.min(...xs), median: Math.round(median(xs) * 1000) / 1000, max: Math.max(...xs) });

/** Where a side's tail begins: the pooled percentiles between p90 and p99.9. The floor's late
 *  wake-ups start near p99.5; the orders' start earlier, which is what puts their p99 in them
 *  (docs/orders-performance.md, "What the p99 is made of"). */
export const TAIL_PERCENTILES = [90, 95, 97, 98, 99, 99.5, 99.9] as const;
const tailOf = (h: Histogram) => Object.fromEntries(TAIL_PERCENTILES.map((q) => [`p${q}`, h.percentile(q)]));

/** Each pair's p50 and p99 of both sides and their ratio other / base; the ratios' min, median and
 *  max over the pairs; the pooled blocks of each side (n beside every percentile) and their ratio. */
export function pairedComparison(pairs: { base: Block; other: Block }[]) {
  if (pairs.length === 0) throw new Error('pairedComparison: no pairs');
  const each = pairs.map(({ base, other }) => ({
    baseUs: { p50: base.latencyUs.p50, p99: base.latencyUs.p99 },
    otherUs: { p50: other.latencyUs.p50, p99: other.latencyUs.p99 },
    otherOverBase: { p50: ratio(other.latencyUs.p50, base.latencyUs.p50), p99: ratio(other.latencyUs.p99, base.latencyUs.p99) },
  }));
  const pool = (side: 'base' | 'other') => {
    const h = new Histogram();
    for (const p of pairs) h.merge(p[side].hist);
    return h;
  };
  const baseHist = pool('base');
  const otherHist = pool('other');
  const base = baseHist.summary();
  const other = otherHist.summary();
  return {
    pairs: each,
    otherOverBaseP50: spread(each.map((e) => e.otherOverBase.p50)),
    otherOverBaseP99: spread(each.map((e) => e.otherOverBase.p99)),
    pooled: { baseUs: base, otherUs: other, otherOverBase: { p50: ratio(other.p50, base.p50), p99: ratio(other.p99, base.p99) } },
    tail: { baseUs: tailOf(baseHist), otherUs: tailOf(otherHist) },
  };
}

/** bench/http.ts --sequential's names: the floor is the base, the orders the other side. */
export function pairedRatios(pairs: { floor: Block; orders: Block }[]) {
  if (pairs.length === 0) throw new Error('pairedRatios: no pairs');
  const r = pairedComparison(pairs.map((p) => ({ base: p.floor, other: p.orders })));
  return {
    pairs: r.pairs.map((e) => ({ floorUs: e.baseUs, orderSendUs: e.otherUs, overFloor: e.otherOverBase })),
    overFloorP99: r.otherOverBaseP99,
    pooled: { floorUs: r.pooled.baseUs, orderSendUs: r.pooled.otherUs, overFloor: r.pooled.otherOverBase },
    tail: { floorUs: r.tail.baseUs, orderSendUs: r.tail.otherUs },
  };
}
