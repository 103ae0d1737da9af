// Event-loop lag is sampled (a 10 ms timer of the thread's own) only while the thread works: an
// idle thread is not woken 100 times a second for it (issue 19).
import { describe, expect, it } from 'vitest';
import { ACTIVE_UTILIZATION, startThreadStats } from '../../src/runtime/threadStats.js';

describe('thread stats', () => {
  it('stops sampling the lag after an idle window and starts again after a busy one', () => {
    let busy = 0;
    const stats = startThreadStats(() => busy);
    try {
      expect(stats.sampling).toBe(true);
      busy = ACTIVE_UTILIZATION / 10;
      stats.snapshot();
      expect(stats.sampling).toBe(false);
      const idle = stats.snapshot();
      expect(idle.lagP99).toBe(0);
      expect(idle.lagMax).toBe(0);
      expect(stats.sampling).toBe(false);
      busy = 0.3;
      stats.snapshot();
      expect(stats.sampling).toBe(true);
      busy = ACTIVE_UTILIZATION;
      stats.snapshot();
      expect(stats.sampling).toBe(true);
    } finally {
      stats.stop();
    }
  });

});
