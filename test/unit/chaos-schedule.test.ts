// The chaos run's schedules (test/helpers/chaosSchedule.ts): only faults the runner can carry out on
// the cluster it has, sized against the lease, and described so a failure names what happened.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canOverlap, describeSingleStep, describeStep, scheduleArb, scheduleMs, singleScheduleArb, type SingleFault, type Step } from '../helpers/chaosSchedule.js';

const LEASE_MS = 1_500;
const IDS = ['c1-a', 'c1-b', 'c1-c'];

describe('chaos schedules', () => {
  it('name an existing node, freeze a node past the lease (never longer than two), keep a killed node down at most two leases', () => {
    fc.assert(fc.property(scheduleArb(IDS.length, LEASE_MS), (steps) => {
      expect(steps.length).toBeGreaterThanOrEqual(2);
      expect(steps.length).toBeLessThanOrEqual(5);
      for (const { fault, also, pauseMs } of steps) {
        expect(pauseMs).toBeGreaterThanOrEqual(200);
        for (const f of also ? [fault, also] : [fault]) {
          if ('node' in f) expect(IDS[f.node]).toBeDefined();
          if (f.kind === 'freeze') expect(f.ms).toBeGreaterThanOrEqual(LEASE_MS);
          if (f.kind === 'freeze') expect(f.ms).toBeLessThanOrEqual(2 * LEASE_MS);
          if (f.kind === 'kill') expect(f.downMs).toBeLessThanOrEqual(2 * LEASE_MS);
        }
        // Two at once: never the same node or engine twice, so at least one of three nodes serves.
        if (also) expect(canOverlap(fault, also)).toBe(true);
      }
      expect(scheduleMs(steps)).toBeGreaterThanOrEqual(steps.reduce((ms, s) => ms + s.pauseMs, 0));
    }));
  });

  it('draw every kind of fault', () => {
    const kinds = new Set(fc.sample(scheduleArb(IDS.length, LEASE_MS), { numRuns: 300, seed: 7 }).flat().map((s) => s.fault.kind));
    expect([...kinds].sort()).toEqual(['freeze', 'kill', 'natsFreeze', 'natsRestart', 'pgRestart', 'term']);
    expect(fc.sample(scheduleArb(IDS.length, LEASE_MS), { numRuns: 100, seed: 7 }).flat().some((s) => s.also)).toBe(true);
  });

  it('overlap two faults only on different targets', () => {
    expect(canOverlap({ kind: 'kill', node: 0, downMs: 0 }, { kind: 'freeze', node: 1, ms: 1_500 })).toBe(true);
    expect(canOverlap({ kind: 'kill', node: 0, downMs: 0 }, { kind: 'term', node: 0 })).toBe(false);
    expect(canOverlap({ kind: 'natsRestart' }, { kind: 'natsFreeze', ms: 300 })).toBe(false);
    expect(canOverlap({ kind: 'natsRestart' }, { kind: 'pgRestart' })).toBe(true);
    expect(canOverlap({ kind: 'pgRestart' }, { kind: 'term', node: 2 })).toBe(true);
  });

  it('describe each step with the node it hits and how long', () => {
    const steps: Step[] = [
      { fault: { kind: 'kill', node: 1, downMs: 900 }, pauseMs: 500 },
      { fault: { kind: 'freeze', node: 2, ms: 2_000 }, pauseMs: 300 },
      { fault: { kind: 'term', node: 0 }, pauseMs: 200 },
      { fault: { kind: 'natsFreeze', ms: 700 }, pauseMs: 1_000 },
      { fault: { kind: 'pgRestart' }, pauseMs: 250 },
      { fault: { kind: 'natsRestart' }, also: { kind: 'kill', node: 2, downMs: 400 }, alsoAfterMs: 100, pauseMs: 300 },
    ];
    expect(steps.map((s) => describeStep(s, IDS))).toEqual([
      'SIGKILL c1-b, relaunched after 900 ms; then 500 ms of traffic',
      'SIGSTOP c1-c for 2000 ms; then 300 ms of traffic',
      'SIGTERM c1-a, relaunched; then 200 ms of traffic',
      'nats-server frozen for 700 ms; then 1000 ms of traffic',
      'PostgreSQL restarted; then 250 ms of traffic',
      'nats-server restarted, and 100 ms later meanwhile: SIGKILL c1-c, relaunched after 400 ms; then 300 ms of traffic',
    ]);
    expect(scheduleMs(steps)).toBe(500 + 900 + 300 + 2_000 + 200 + 1_000 + 700 + 250 + 300 + 500);
  });
});

describe('single-node chaos schedules', () => {
  const target = (f: SingleFault) => (f.kind === 'rebind' ? `seat ${f.slot}` : f.kind === 'sim' ? `sim ${f.slot}` : 'process');
  it('name an existing account or rebindable one, keep the process down at most 2 s and frozen at most 4 s, overlap only different targets', () => {
    fc.assert(fc.property(singleScheduleArb(4, 2), (steps) => {
      expect(steps.length).toBeGreaterThanOrEqual(2);
      expect(steps.length).toBeLessThanOrEqual(5);
      for (const { fault, also } of steps) {
        for (const f of also ? [fault, also] : [fault]) {
          if (f.kind === 'rebind') expect(f.slot).toBeLessThan(2);
          if (f.kind === 'sim') expect(f.slot).toBeLessThan(4);
          if (f.kind === 'kill' || f.kind === 'killAtMove') expect(f.downMs).toBeLessThanOrEqual(2_000);
          if (f.kind === 'freeze') expect(f.ms).toBeLessThanOrEqual(4_000);
        }
        if (also) expect(target(also)).not.toBe(target(fault));
      }
    }));
  });

  it('draw every kind of fault, and pairs', () => {
    const drawn = fc.sample(singleScheduleArb(4, 2), { numRuns: 300, seed: 7 }).flat();
    expect([...new Set(drawn.map((s) => s.fault.kind))].sort()).toEqual(['freeze', 'kill', 'killAtMove', 'rebind', 'sim', 'term', 'termKill']);
    expect(drawn.some((s) => s.also)).toBe(true);
  });

  it('describe each step', () => {
    expect([
      { fault: { kind: 'killAtMove', afterMoveMs: 40, downMs: 300 }, pauseMs: 500 },
      { fault: { kind: 'rebind', slot: 0, live: true }, pauseMs: 300 },
      { fault: { kind: 'rebind', slot: 1, live: false }, also: { kind: 'sim', fault: 'drop', slot: 0, ms: 900 }, alsoAfterMs: 100, pauseMs: 200 },
    ].map((s) => describeSingleStep(s as Parameters<typeof describeSingleStep>[0]))).toEqual([
      'SIGKILL 40 ms after a key move, restarted after 300 ms; then 500 ms of traffic',
      'seat of rebindable account 0 removed while its clients trade, its login bound on another shard; then 300 ms of traffic',
      "seat of rebindable account 1 removed, its login bound on another shard, and 100 ms later meanwhile: simulator drop on account 0's login for 900 ms; then 200 ms of traffic",
    ]);
  });
});
