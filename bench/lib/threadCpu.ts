// CPU time per thread of this process over a window (Linux /proc/self/task/*/stat, USER_HZ ticks),
// to tell which thread saturates under load: the main thread (its tid is the pid) or one of the
// workers (a shard, the floor's worker; Node names them all "node", so they are told apart by load).
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_S = 100; // USER_HZ on Linux

function sample(): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return out; // not Linux: no per-thread figures
  }
  for (const t of tids) {
    try {
      const stat = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces) start after the last ')'.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(t), Number(f[11]) + Number(f[12])); // utime + stime (fields 14 and 15)
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

export interface ThreadCpu {
  /** Share of one core the main thread used over the window (1 = a whole core). */
  main: number;
  /** The other threads' shares, busiest first (those above 2 %). */
  others: number[];
  /** CPU seconds over the window: the main thread's, and the others' in the order of `others`
   *  (divided by the work done in the window: CPU per unit, which survives a loaded machine). */
  cpuSeconds: { main: number; others: number[] };
}

/** Starts a window; the returned function ends it. */
export function threadCpuWindow(): () => ThreadCpu {
  const t0 = performance.now();
  const before = sample();
  return () => {
    const seconds = (performance.now() - t0) / 1000;
    const cpu = (tid: number, ticks: number) => (ticks - (before.get(tid) ?? 0)) / TICKS_PER_S;
    const share = (s: number) => Math.round((s / seconds) * 100) / 100;
    const after = sample();
    const others = [...after].filter(([tid]) => tid !== process.pid).map(([tid, t]) => cpu(tid, t)).filter((s) => share(s) > 0.02).sort((a, b) => b - a);
    const main = cpu(process.pid, after.get(process.pid) ?? 0);
    return { main: share(main), others: others.map(share), cpuSeconds: { main, others } };
  };
}
