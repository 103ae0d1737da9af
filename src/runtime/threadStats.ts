// Event-loop lag and GC pauses of one thread (main or a shard), measured by the thread itself:
// a lagging shard delays every account on it, and prom-client's default metrics see the main
// thread only. Shards post a snapshot to main every THREAD_STATS_MS as a `thread.stats` event;
// /metrics shows one series per thread.
import { monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';

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
}

declare module './protocol.js' {
  interface ShardEventMap {
    [THREAD_STATS_EVENT]: ThreadStats;
  }
}

export function startThreadStats(): { snapshot(): ThreadStats; stop(): void } {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
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
      const s = { lagP99: delay.percentile(99) / 1e9, lagMax: delay.max / 1e9, gcSeconds, gcCount };
      delay.reset();
      return s;
    },
    stop() {
      delay.disable();
      gc.disconnect();
    },
  };
}
