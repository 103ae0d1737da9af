// The list-version rules (src/runtime/hosts/listVersion.ts) against a model of one account's stream
// state: the broker's list changes, each change's event carries the whole list and its count; a
// snapshot takes the count when its read begins, reads the broker some changes later and answers
// some changes after that; the stream edge gets events and answers in the order they were posted,
// and applies each unless the rules call it older. Whatever the interleaving, the list held at the
// end is the broker's. Also across stream states: a list counted by another (src) never hides the
// later changes of this one.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { eventIsOlder, NO_VERSION, snapshotIsOlder, type ListVersion } from '../../src/runtime/hosts/listVersion.js';

type Step = { t: 'change' } | { t: 'snapshot'; readAfter: number; replyAfter: number };
interface Held { list: number | null; v: ListVersion }

function run(steps: Step[], src: number, start: Held): { held: Held; broker: number } {
  let broker = 0;
  let count = 0;
  const posted: Array<() => void> = [];
  const held = { ...start };
  const pending: Array<{ v: number; readIn: number; replyIn: number; list: number | null }> = [];
  const tick = () => {
    for (const p of pending) {
      if (p.readIn-- === 0) p.list = broker;
      if (p.replyIn-- === 0) {
        const snap = { src, v: p.v };
        const list = p.list!;
        posted.push(() => {
          if (held.list === null || !snapshotIsOlder(snap, held.v)) Object.assign(held, { list, v: snap });
        });
      }
    }
  };
  for (const s of steps) {
    if (s.t === 'change') {
      broker++;
      const ev = { src, v: ++count, list: broker };
      posted.push(() => {
        if (held.list === null || !eventIsOlder(ev, held.v)) Object.assign(held, { list: ev.list, v: { src: ev.src, v: ev.v } });
      });
    } else {
      pending.push({ v: count, readIn: s.readAfter, replyIn: s.readAfter + s.replyAfter, list: null });
    }
    tick();
  }
  while (pending.some((p) => p.replyIn >= 0)) tick(); // answers still out come after the last change
  for (const apply of posted) apply();
  return { held, broker };
}

const steps = fc.array(fc.oneof(
  fc.constant<Step>({ t: 'change' }),
  fc.record({ t: fc.constant('snapshot' as const), readAfter: fc.nat(3), replyAfter: fc.nat(3) }),
), { maxLength: 30 });

describe('list versions', () => {
  it('fast-check: events and snapshots in any interleaving leave the broker\'s list held', () => {
    fc.assert(fc.property(steps, (s) => {
      const { held, broker } = run(s, 7, { list: null, v: NO_VERSION });
      if (s.length > 0) expect(held.list).toBe(broker);
    }), { numRuns: 2_000 });
  });

  it('fast-check: a list counted by another stream state, however high its count, never hides this one\'s changes', () => {
    fc.assert(fc.property(steps, fc.integer({ min: 1, max: 1_000 }), (s, foreignV) => {
      const { held, broker } = run([{ t: 'change' }, ...s], 7, { list: -1, v: { src: 9, v: foreignV } });
      expect(held.list).toBe(broker);
    }), { numRuns: 2_000 });
  });
});
