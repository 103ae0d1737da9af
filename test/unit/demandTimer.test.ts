import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DemandTimer } from '../../src/util/demandTimer.js';

describe('DemandTimer', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('does not run until armed, runs while work is pending, then stops until armed again', () => {
    let pending = 0;
    const runs: number[] = [];
    const t = new DemandTimer(20, () => {
      runs.push(Date.now());
      if (pending > 0) pending--;
      return pending > 0;
    });
    vi.advanceTimersByTime(1000);
    expect(runs).toHaveLength(0);
    expect(vi.getTimerCount()).toBe(0);

    pending = 3;
    t.arm();
    t.arm(); // armed already: one timer
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(1000);
    expect(runs).toHaveLength(3);
    expect(runs[1]! - runs[0]!).toBe(20);
    expect(t.armed).toBe(false);
    expect(vi.getTimerCount()).toBe(0);

    pending = 1;
    t.arm();
    vi.advanceTimersByTime(20);
    expect(runs).toHaveLength(4);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stop() disarms it for good', () => {
    let runs = 0;
    const t = new DemandTimer(10, () => ++runs > 0);
    t.arm();
    t.stop();
    t.arm();
    vi.advanceTimersByTime(100);
    expect(runs).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
