// CPU seconds from Linux's /proc, for TEST_CPU_OUT's per-file record (cpuRecord.ts): not for assertions.
//
// A child's CPU reaches its parent's reaped-children time (cutime, cstime) only when the parent
// reaps it, and so on up. Chromium's renderers and GPU process are forked by its zygotes, which the
// browser process does not reap when it exits (they end as orphans of init): their CPU never reaches
// the worker's reaped time, nor that of `/usr/bin/time npm test`. dashboard-feedback.browser
// (2026-11-28): 11.1 CPU-s counted so, 26.0 by sampling /proc of each Chromium process every 30 ms.
// helpers/browser.ts reads the tree just before it closes the browser; what the worker's reaped
// time then misses is added to the file's line as `unreaped`.
import { readdirSync, readFileSync } from 'node:fs';

const TICK = 100; // USER_HZ on Linux

export interface ProcCpu {
  /** utime + stime: its own. */
  self: number;
  /** cutime + cstime: the children it reaped (each with theirs). */
  children: number;
  ppid: number;
}

export function procCpu(pid: number | 'self'): ProcCpu | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined; // gone meanwhile
  }
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // After the ')': state is field 3, ppid 4; utime 14, stime 15, cutime 16, cstime 17 (1-based).
  const n = (i: number) => Number(f[i - 3]);
  return { self: (n(14) + n(15)) / TICK, children: (n(16) + n(17)) / TICK, ppid: n(4) };
}

/** This process's reaped children's CPU seconds. */
export const reapedCpu = (): number => procCpu('self')?.children ?? 0;

/** The CPU seconds of this process's child whose command line holds `marker`, and of every live
 *  process under it, each with the children it reaped; undefined when there is no such child. */
export function treeCpu(marker: string): number | undefined {
  const all = new Map<number, ProcCpu>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    const s = procCpu(Number(d));
    if (s) all.set(Number(d), s);
  }
  const cmdline = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      return '';
    }
  };
  const root = [...all].find(([pid, s]) => s.ppid === process.pid && cmdline(pid).includes(marker))?.[0];
  if (root === undefined) return undefined;
  let total = 0;
  const todo = [root];
  while (todo.length > 0) {
    const pid = todo.pop()!;
    const s = all.get(pid)!;
    total += s.self + s.children;
    for (const [child, c] of all) if (c.ppid === pid) todo.push(child);
  }
  return total;
}

const g = globalThis as { __tagwUnreapedCpu?: number };
/** CPU seconds this worker's processes spent that no reaped time counts (see the top). */
export function noteUnreaped(seconds: number): void {
  g.__tagwUnreapedCpu = (g.__tagwUnreapedCpu ?? 0) + Math.max(0, seconds);
}
export const unreapedCpu = (): number => g.__tagwUnreapedCpu ?? 0;
