import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import { seatMachine, type SeatContext } from '../../actors/seat.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

function run(readyAt: number) {
  const persisted: SeatContext[] = [];
  const actor = createActor(seatMachine.provide({ actions: { persist: (_a, c: SeatContext) => void persisted.push({ ...c }) } }), {
    input: { seatId: 's1', readyAt },
  });
  actor.start();
  return { actor, persisted };
}

describe('seat machine', () => {
  it('a seat whose readyAt has passed starts ACTIVE and persists once', () => {
    const { actor, persisted } = run(Date.now());
    expect(actor.getSnapshot().context.status).toBe('ACTIVE');
    expect(persisted.map((p) => p.status)).toEqual(['ACTIVE']);
  });

  it('a building seat becomes ACTIVE exactly at readyAt', () => {
    const { actor, persisted } = run(Date.now() + 5_000);
    expect(actor.getSnapshot().context.status).toBe('BUILDING_SERVER');
    vi.advanceTimersByTime(4_999);
    expect(actor.getSnapshot().context.status).toBe('BUILDING_SERVER');
    vi.advanceTimersByTime(1);
    expect(actor.getSnapshot().context.status).toBe('ACTIVE');
    expect(persisted.map((p) => p.status)).toEqual(['BUILDING_SERVER', 'ACTIVE']);
  });

  it('property: whatever the readyAt and however time advances, status is ACTIVE iff now >= readyAt, persisted BUILDING then ACTIVE at most once each', () => {
    fc.assert(
      fc.property(fc.integer({ min: -10_000, max: 60_000 }), fc.array(fc.integer({ min: 0, max: 20_000 }), { maxLength: 10 }), (offset, steps) => {
        const readyAt = Date.now() + offset;
        const { actor, persisted } = run(readyAt);
        const check = () => {
          const active = Date.now() >= readyAt;
          expect(actor.getSnapshot().context.status).toBe(active ? 'ACTIVE' : 'BUILDING_SERVER');
        };
        check();
        for (const s of steps) {
          vi.advanceTimersByTime(s);
          check();
        }
        const statuses = persisted.map((p) => p.status);
        expect(statuses.filter((s) => s === 'ACTIVE').length).toBeLessThanOrEqual(1);
        expect(statuses.filter((s) => s === 'BUILDING_SERVER').length).toBeLessThanOrEqual(1);
        if (statuses.length === 2) expect(statuses).toEqual(['BUILDING_SERVER', 'ACTIVE']);
        for (const p of persisted) expect(p.readyAt).toBe(readyAt);
        actor.stop();
      }),
      { numRuns: 200 },
    );
  });
});
