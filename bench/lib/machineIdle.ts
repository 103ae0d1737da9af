// The share of the whole machine's CPU time left idle over a window (Linux /proc/stat, all CPUs):
// beside a throughput it tells a rate bound by CPU (idle near 0) from one bound by hand-offs
// between threads and processes, where every thread waits on another and the CPUs idle meanwhile
// (docs/orders-performance.md, "Why the p99 and concurrent goals are not shown met here"). Not Linux: null.
import { readFileSync } from 'node:fs';

function cpuLine(): number[] | null {
  try {
    // "cpu  user nice system idle iowait irq softirq steal ..." in USER_HZ ticks.
    return readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  } catch {
    return null;
  }
}

/** Starts a window; the function it returns gives the idle share (idle + iowait over all) since. */
export function machineIdleWindow(): () => number | null {
  const before = cpuLine();
  return () => {
    const after = cpuLine();
    if (!before || !after) return null;
    const d = after.map((v, i) => v - (before[i] ?? 0));
    const total = d.reduce((a, b) => a + b, 0);
    return total > 0 ? Math.round(((d[3]! + (d[4] ?? 0)) / total) * 100) / 100 : null;
  };
}
