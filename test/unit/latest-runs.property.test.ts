// LatestRuns (src/util/latestRuns.ts): the copies of an account's binding and sessions to PostgreSQL
// and the tenancy mirror's passes run through it. Property: whatever the interleaving of requests
// and completions, runs of one key never overlap, every request is answered by a run that started
// after it (so read the state as of the request or later), and the last run of a key read the
// newest state.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LatestRuns } from '../../src/util/latestRuns.js';

describe('LatestRuns', () => {
  it('one run at a time per key; a request is answered by a run that read its state or newer; the last run read the newest', async () => {
    await fc.assert(fc.asyncProperty(
      fc.array(fc.record({ key: fc.constantFrom('a', 'b'), settle: fc.nat(3), fail: fc.boolean() }), { minLength: 1, maxLength: 30 }),
      async (steps) => {
        const state = new Map<string, number>();
        const running = new Map<string, number>();
        let overlap = false;
        const pending: Array<() => void> = [];
        const runs = new LatestRuns<number>(async (key) => {
          running.set(key, (running.get(key) ?? 0) + 1);
          if (running.get(key)! > 1) overlap = true;
          const seen = state.get(key) ?? 0;
          await new Promise<void>((r) => pending.push(r));
          running.set(key, running.get(key)! - 1);
          if (steps[seen % steps.length]!.fail) throw new Error(`run of ${key} failed`);
          return seen;
        });
        const last = new Map<string, Promise<unknown>>();
        const answers: Array<Promise<void>> = [];
        for (const step of steps) {
          const wrote = (state.get(step.key) ?? 0) + 1;
          state.set(step.key, wrote);
          const p = runs.request(step.key);
          last.set(step.key, p);
          answers.push(p.then((seen) => expect(seen).toBeGreaterThanOrEqual(wrote), () => undefined));
          // Let some runs finish between requests.
          for (let i = 0; i < step.settle && pending.length > 0; i++) pending.shift()!();
          await new Promise((r) => setImmediate(r));
        }
        while (pending.length > 0 || running.get('a') || running.get('b')) {
          pending.shift()?.();
          await new Promise((r) => setImmediate(r));
        }
        await Promise.all(answers);
        expect(overlap).toBe(false);
        for (const [key, p] of last) {
          const seen = await p.catch(() => state.get(key));
          expect(seen).toBe(state.get(key));
        }
      },
    ), { numRuns: 200 });
  });

  it('requests made while a run is out share one next run', async () => {
    let started = 0;
    let release: () => void = () => {};
    const runs = new LatestRuns<number>(async () => {
      const n = ++started;
      await new Promise<void>((r) => (release = r));
      return n;
    });
    const first = runs.request('k');
    const queued = [runs.request('k'), runs.request('k'), runs.request('k')];
    release();
    expect(await first).toBe(1);
    await new Promise((r) => setImmediate(r));
    release();
    expect(await Promise.all(queued)).toEqual([2, 2, 2]);
    expect(started).toBe(2);
  });

  it('settled() waits for the running and the queued runs, failed ones included', async () => {
    const release: Array<() => void> = [];
    let ended = 0;
    const runs = new LatestRuns<void>(async (key) => {
      await new Promise<void>((r) => release.push(r));
      ended++;
      if (key === 'b') throw new Error('failed run');
    });
    const asked = [runs.request('a'), runs.request('a'), runs.request('b')].map((p) => p.catch(() => undefined));
    let settled = false;
    const done = runs.settled().then(() => (settled = true));
    const tick = () => new Promise((r) => setTimeout(r, 0));
    await tick();
    expect([release.length, settled]).toEqual([2, false]); // 'a' and 'b' out, a second 'a' queued
    release.splice(0).forEach((r) => r());
    await tick();
    expect([ended, release.length, settled]).toEqual([2, 1, false]); // the queued 'a' out now
    release.splice(0).forEach((r) => r());
    await done;
    await Promise.all(asked);
    expect(ended).toBe(3);
  });
});
