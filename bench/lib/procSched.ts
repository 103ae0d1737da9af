// CPU time and run-queue wait of whole processes (all their threads), from Linux's per-thread
// scheduler counters (/proc/<pid>/task/*/schedstat: ns on a CPU, ns runnable but waiting, slices).
// The cluster bench uses them to show what a forwarded order costs each process on its path, beside
// the latency ratio (docs/cluster.md, Costs). Not Linux, or the process gone: null.
import { readdirSync, readFileSync } from 'node:fs';

export interface Sched { runNs: number; waitNs: number }

export function procSched(pid: number): Sched | null {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  const s: Sched = { runNs: 0, waitNs: 0 };
  for (const t of tids) {
    try {
      const [run, wait] = readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ').map(Number);
      s.runNs += run!;
      s.waitNs += wait!;
    } catch {
      // the thread ended meanwhile
    }
  }
  return s;
}

/** Sums, per named process, what each window between start() and its stop() added. */
export class SchedTally {
  private readonly sum = new Map<string, Sched>();

  constructor(private readonly pids: Record<string, number | undefined>) {}

  start(): () => void {
    const before = this.read();
    return () => {
      const after = this.read();
      for (const [name, a] of after) {
        const b = before.get(name);
        if (!b) continue;
        const t = this.sum.get(name) ?? { runNs: 0, waitNs: 0 };
        t.runNs += a.runNs - b.runNs;
        t.waitNs += a.waitNs - b.waitNs;
        this.sum.set(name, t);
      }
    };
  }

  /** µs of CPU and of run-queue wait per unit of work (`n`), by process name. */
  perUnit(n: number): Record<string, { cpu: number; runQueue: number }> {
    return Object.fromEntries([...this.sum].map(([name, t]) => [name, { cpu: Math.round(t.runNs / 1000 / n), runQueue: Math.round(t.waitNs / 1000 / n) }]));
  }

  private read(): Map<string, Sched> {
    const m = new Map<string, Sched>();
    for (const [name, pid] of Object.entries(this.pids)) {
      const s = pid === undefined ? null : procSched(pid);
      if (s) m.set(name, s);
    }
    return m;
  }
}
