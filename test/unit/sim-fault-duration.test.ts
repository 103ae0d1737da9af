// A fault's durationMs bounds every kind, not only drop and mute: the routes and the servers file
// take `durationMs` on a latency, reject or timeoutAfterSend fault, and a benchmark harness that
// asks for "200 ms of latency for 5 s" must get it back to normal after 5 s (an account owner
// cannot clear a fault of their own account: only the operator's DELETE /v1/sim/faults can).
import { describe, expect, it } from 'vitest';
import { FaultController } from '../../src/sim/faults.js';

describe('simulator faults: durationMs ends every kind', () => {
  it('a latency with durationMs adds its latency until then, and nothing after', () => {
    let now = 1_000;
    const f = new FaultController(1, () => now);
    f.set({ server: 'S', login: 'a', kind: 'latency', latencyMs: 200, durationMs: 5_000 });
    f.set({ server: 'S', login: 'a', kind: 'latency', latencyMs: 30 });
    expect(f.latency('S', 'a')).toBe(230);
    now += 4_999;
    expect(f.latency('S', 'a')).toBe(230);
    now += 1;
    expect(f.latency('S', 'a')).toBe(30);
    expect(f.list().map((x) => x.latencyMs)).toEqual([30]);
  });

  it('a reject or timeoutAfterSend with durationMs stops acting at its end, whatever count is left', () => {
    let now = 0;
    const f = new FaultController(1, () => now);
    f.set({ server: 'S', kind: 'reject', count: 100, durationMs: 1_000 });
    f.set({ server: 'S', kind: 'timeoutAfterSend', probability: 1, durationMs: 2_000 });
    expect(f.tradeFault('S', 'a')).toBe('reject');
    now = 1_000;
    expect(f.tradeFault('S', 'a')).toBe('timeoutAfterSend');
    now = 2_000;
    expect(f.tradeFault('S', 'a')).toBe(null);
    expect(f.list()).toEqual([]);
  });

  it('without durationMs they last as before (until cleared or their count is used up)', () => {
    let now = 0;
    const f = new FaultController(1, () => now);
    f.set({ server: 'S', kind: 'latency', latencyMs: 10 });
    f.set({ server: 'S', kind: 'reject', probability: 1 });
    now = 3_600_000;
    expect(f.latency('S', 'a')).toBe(10);
    expect(f.tradeFault('S', 'a')).toBe('reject');
  });
});

describe('simulator faults: clear counts what was still in force', () => {
  it('a drop already over is not counted as cleared (bot walk: DELETE /v1/sim/faults answered cleared 3 for 2 live faults)', () => {
    let now = 0;
    const f = new FaultController(1, () => now);
    f.set({ server: 'S', kind: 'drop', durationMs: 3_000 });
    f.set({ server: 'S', login: 'a', kind: 'mute', durationMs: 10_000 });
    f.set({ server: 'S', login: 'a', kind: 'latency', latencyMs: 300 });
    now = 4_000;
    expect(f.clear(undefined, 'S')).toBe(2);
  });
});
