// Event-loop lag and GC pauses of one thread (main or a shard), measured by the thread itself:
// a lagging shard delays every account on it, and prom-client's default metrics see the main
// thread only. Shards post a snapshot to main every THREAD_STATS_MS as a `thread.stats` event;
// /metrics shows one series per thread.
//
// The delay is sampled by a 10 ms timer of its own (100 wake-ups a second), so only while the
// thread worked in the last window (event-loop utilization at least ACTIVE_UTILIZATION): an idle
// thread has no lag to speak of and is not woken for it (issue 19). A window that follows an idle
// one shows no lag (0) while sampling starts.
import { monitorEventLoopDelay, performance, PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';

export const THREAD_STATS_EVENT = 'thread.stats';
/** How often a snapshot is taken (the lag figures are over this window). */
export const THREAD_STATS_MS = 5_000;

export interface ThreadStats {
  /** Event-loop delay over the last window (seconds). */
  lagP99: number;
  lagMax: number;
  /** Since the thread started: total GC pause time (seconds) and collections. */
  gcSeconds: number;
  gcCount: number;
  /** The thread's own V8 heap (each worker has its own isolate; prom-client sees main's only): used and reserved bytes at the snapshot. */
  heapUsedBytes: number;
  heapTotalBytes: number;
}

declare module './protocol.js' {
  interface ShardEventMap {
    [THREAD_STATS_EVENT]: ThreadStats;
  }
}

/** A window with less of the loop's time spent working than this counts as idle. */
export const ACTIVE_UTILIZATION = 0.01;

/** `utilization`: the loop's busy share since the last call (injected in unit tests). */
export function startThreadStats(utilization: () => number = eventLoopUtilizationSince()): { snapshot(): ThreadStats; stop(): void; readonly sampling: boolean } {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable(); // a thread starts working
  let sampling = true;
  let gcSeconds = 0;
  let gcCount = 0;
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcSeconds += e.duration / 1000;
      gcCount++;
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  return {
    snapshot() {
      // The histogram is in nanoseconds; it is reset so each snapshot covers one window.
      const heap = getHeapStatistics();
      const s: ThreadStats = {
        lagP99: sampling ? delay.percentile(99) / 1e9 : 0, lagMax: sampling ? delay.max / 1e9 : 0, gcSeconds, gcCount,
        heapUsedBytes: heap.used_heap_size, heapTotalBytes: heap.total_heap_size,
      };
      delay.reset();
      const working = utilization() >= ACTIVE_UTILIZATION;
      if (working !== sampling) {
        if (working) delay.enable();
        else delay.disable();
        sampling = working;
      }
      return s;
    },
    stop() {
      delay.disable();
      gc.disconnect();
    },
    get sampling() {
      return sampling;
    },
  };
}

function eventLoopUtilizationSince(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const u = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    return u;
  };
}
