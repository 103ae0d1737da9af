// Latency histogram with 1 µs resolution up to 100 ms (a flat array: recording is one increment)
// and an overflow bucket; percentiles are exact to the microsecond within range.
/** What toJSON sends. */
export interface HistogramData { at: [number, number][]; overflow: number; count: number; sum: number; max: number }

export class Histogram {
  private readonly counts: Uint32Array;
  private overflow = 0;
  count = 0;
  private sum = 0;
  max = 0;

  constructor(private readonly maxUs = 100_000) {
    this.counts = new Uint32Array(maxUs + 1);
  }

  record(us: number): void {
    const v = Math.max(0, Math.round(us));
    if (v > this.maxUs) this.overflow++;
    else this.counts[v]!++;
    this.count++;
    this.sum += v;
    if (v > this.max) this.max = v;
  }

  merge(other: HistogramData | { counts: number[] | Uint32Array; overflow: number; count: number; sum: number; max: number }): void {
    if ('counts' in other) {
      for (let i = 0; i < other.counts.length && i <= this.maxUs; i++) this.counts[i]! += other.counts[i]!;
    } else {
      for (const [v, c] of other.at) if (v <= this.maxUs) this.counts[v]! += c;
    }
    this.overflow += other.overflow;
    this.count += other.count;
    this.sum += other.sum;
    this.max = Math.max(this.max, other.max);
  }

  /** Plain data for sending across processes: the buckets that hold something, as [µs, count]. (All
   *  100,001 of them, sent after each block of 100 orders, cost the cluster bench's processes more CPU
   *  per order than the forwarding it measures.) */
  toJSON(): HistogramData {
    const at: [number, number][] = [];
    for (let i = 0; i <= this.maxUs; i++) if (this.counts[i]) at.push([i, this.counts[i]!]);
    return { at, overflow: this.overflow, count: this.count, sum: this.sum, max: this.max };
  }

  percentile(p: number): number {
    if (this.count === 0) return NaN;
    // p * count / 100, not p / 100 * count: 99.9 / 100 * 1000 is 999.0000000000001, whose ceiling
    // took the p99.9 of 1,000 samples one sample too far.
    const target = Math.ceil((p * this.count) / 100);
    let seen = 0;
    for (let i = 0; i <= this.maxUs; i++) {
      seen += this.counts[i]!;
      if (seen >= target) return i;
    }
    return this.max;
  }

  mean(): number {
    return this.count ? this.sum / this.count : NaN;
  }

  summary() {
    return { n: this.count, p50: this.percentile(50), p99: this.percentile(99), p999: this.percentile(99.9), max: this.max, mean: Math.round(this.mean()) };
  }
}
