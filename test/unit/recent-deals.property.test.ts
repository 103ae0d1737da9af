// The deal ledger's memory of recent deals (src/stream/recentDeals.ts: typed arrays, no object per
// deal) against the Map it replaced: note = delete then set (a ticket noted again is the newest, its
// time replaced), past the cap the first key goes; over random notes, lookups and evictions at the
// cap, with tickets noted again (same or another time), small and large (above 2^32) tickets.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RecentDeals } from '../../src/stream/recentDeals.js';

class Model {
  readonly m = new Map<number, number>();
  constructor(private readonly cap: number) {}
  note(ticket: number, time: number): void {
    this.m.delete(ticket);
    this.m.set(ticket, time);
    if (this.m.size > this.cap) this.m.delete(this.m.keys().next().value!);
  }
}

const ticketOf = (pool: readonly number[], i: number) => pool[i % pool.length]!;

describe('recent deals: the same answers as an insertion-ordered Map with the oldest evicted', () => {
  it('over random notes and lookups, at caps from 1 to 40, through growth, holes and wrap-around', () => {
    fc.assert(fc.property(
      fc.integer({ min: 1, max: 40 }),
      // Tickets: consecutive ones (a broker's), scattered and large ones (the hash's high bits), zero.
      fc.uniqueArray(fc.oneof(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), fc.constant(2 ** 32)), { minLength: 1, maxLength: 80 }),
      fc.array(fc.oneof(
        fc.record({ t: fc.constant('note' as const), i: fc.nat(), time: fc.integer({ min: 0, max: 3 }) }),
        fc.record({ t: fc.constant('run' as const), from: fc.nat(), n: fc.integer({ min: 1, max: 30 }) }),
        fc.record({ t: fc.constant('get' as const), i: fc.nat() }),
      ), { maxLength: 120 }),
      (cap, pool, ops) => {
        const r = new RecentDeals(cap);
        const model = new Model(cap);
        const note = (ticket: number, time: number) => (r.note(ticket, time), model.note(ticket, time));
        for (const o of ops) {
          if (o.t === 'note') note(ticketOf(pool, o.i), 1_700_000_000_000 + o.time);
          else if (o.t === 'run') for (let k = 0; k < o.n; k++) note(ticketOf(pool, o.from + k), 1_700_000_000_000 + k);
          else expect(r.get(ticketOf(pool, o.i))).toBe(model.m.get(ticketOf(pool, o.i)));
          expect(r.size).toBe(model.m.size);
        }
        for (const t of pool) expect(r.get(t)).toBe(model.m.get(t));
      },
    ), { numRuns: 500 });
  });

  it('at the ledger\'s cap of 4,096: a broker\'s consecutive tickets, some noted again, the oldest forgotten in order', () => {
    const cap = 4096;
    const r = new RecentDeals(cap);
    const model = new Model(cap);
    const wrong: number[] = [];
    let seed = 7;
    const rand = (n: number) => ((seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0) % n);
    for (let i = 0; i < 20_000; i++) {
      // Mostly new tickets; one in 50 an earlier one again (same time or a new one).
      const ticket = rand(50) === 0 ? 1_000_000 + Math.max(0, i - rand(6_000)) : 1_000_000 + i;
      const time = 1_700_000_000_000 + i - (rand(50) === 0 ? 0 : rand(3));
      r.note(ticket, time);
      model.note(ticket, time);
      if (i % 997 === 0) for (let t = 1_000_000 + i - 5_000; t <= 1_000_000 + i; t++) if (r.get(t) !== model.m.get(t)) wrong.push(t);
    }
    expect(r.size).toBe(cap);
    for (let t = 1_000_000; t < 1_020_000; t++) if (r.get(t) !== model.m.get(t)) wrong.push(t);
    expect(wrong).toEqual([]);
  });
});
