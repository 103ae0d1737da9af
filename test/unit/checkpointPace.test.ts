import { describe, expect, it } from 'vitest';
import { checkpointWait, type CheckpointFound } from '../../src/store/checkpointPace.js';

const pace = { intervalMs: 20, busyIntervalMs: 100, idleIntervalMs: 1000, idleAfterRuns: 50 };

/** The waits the thread gives its timer over a sequence of runs (as the worker counts idle runs). */
function waits(found: CheckpointFound[]): number[] {
  let idle = 0;
  return found.map((f) => checkpointWait(pace, f, (idle = f === 'none' ? idle + 1 : 0)));
}

describe('checkpointer pacing', () => {
  it('slows to idleIntervalMs only after idleAfterRuns runs in a row found nothing committed', () => {
    const w = waits(Array<CheckpointFound>(60).fill('none'));
    expect(w.slice(0, 49).every((x) => x === 20)).toBe(true);
    expect(w.slice(49).every((x) => x === 1000)).toBe(true);
  });

  it('a commit makes the next wait short again, and the idle count starts over', () => {
    const w = waits([...Array<CheckpointFound>(50).fill('none'), 'some', ...Array<CheckpointFound>(49).fill('none'), 'none']);
    expect(w[49]).toBe(1000);
    expect(w[50]).toBe(20);
    expect(w.slice(51, 99).every((x) => x === 20)).toBe(true);
    expect(w[100]).toBe(1000);
  });

  it('sustained writes wait busyIntervalMs', () => {
    expect(waits(['none', 'busy', 'busy', 'some'])).toEqual([20, 100, 100, 20]);
  });
});
