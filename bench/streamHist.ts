// µs-resolution latency histogram for the stream bench: a flat array up to 1 s (recording is one
// increment), an overflow count above it; mergeable across processes as plain data.
export interface HistData { counts: number[]; overflow: number; count: number; max: number; sum: number }

export class StreamHist {
  private counts: Uint32Array;
  overflow = 0;
  count = 0;
  max = 0;
  sum = 0;
  constructor(private readonly maxUs = 1_000_000) {
    this.counts = new Uint32Array(maxUs + 1);
  }

  record(us: number): void {
    const v = us < 0 ? 0 : Math.round(us);
    if (v > this.maxUs) this.overflow++;
    else this.counts[v]!++;
    this.count++;
    this.sum += v;
    if (v > this.max) this.max = v;
  }

  reset(): void {
    this.counts.fill(0);
    this.overflow = this.count = this.max = this.sum = 0;
  }

  /** Sparse: only non-empty buckets, as [us, n] pairs flattened. */
  toData(): HistData {
    const counts: number[] = [];
    for (let i = 0; i < this.counts.length; i++) if (this.counts[i]) counts.push(i, this.counts[i]!);
    return { counts, overflow: this.overflow, count: this.count, max: this.max, sum: this.sum };
  }

  merge(d: HistData): void {
    for (let i = 0; i < d.counts.length; i += 2) this.counts[d.counts[i]!]! += d.counts[i + 1]!;
    this.overflow += d.overflow;
    this.count += d.count;
    this.sum += d.sum;
    if (d.max > this.max) this.max = d.max;
  }

  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const target = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i]!;
      if (seen >= target) return i;
    }
    return this.max;
  }

  summary() {
    return { p50: this.percentile(50), p99: this.percentile(99), p999: this.percentile(99.9), max: this.max, n: this.count };
  }
}

/** Wall clock in ms with sub-ms resolution, comparable across processes of one machine. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Latencies of one measuring turn: sparse µs buckets, small enough to keep one per turn. */
export class TurnHist {
  readonly buckets = new Map<number, number>();
  count = 0;
  record(us: number): void {
    const v = us < 0 ? 0 : Math.round(us);
    this.buckets.set(v, (this.buckets.get(v) ?? 0) + 1);
    this.count++;
  }
  /** [us, n, us, n, ...] for the parent process. */
  toData(): number[] {
    const out: number[] = [];
    for (const [us, n] of this.buckets) out.push(us, n);
    return out;
  }
  merge(d: readonly number[]): void {
    for (let i = 0; i < d.length; i += 2) this.buckets.set(d[i]!, (this.buckets.get(d[i]!) ?? 0) + d[i + 1]!);
    for (let i = 1; i < d.length; i += 2) this.count += d[i]!;
  }
  percentile(p: number): number {
    if (this.count === 0) return NaN;
    const target = Math.ceil((p / 100) * this.count);
    let seen = 0;
    for (const us of [...this.buckets.keys()].sort((a, b) => a - b)) {
      seen += this.buckets.get(us)!;
      if (seen >= target) return us;
    }
    return NaN;
  }
}
