// The positions map's running totals (src/sim/positionBook.ts) keep nothing per open position
// beyond the position (issue 19: a receipt per position lived as long as it, and young-generation
// scavenges copied each until promoted): what a position added is worked out again when it is
// touched. Property: after random opens, in-place changes (through get), replacements and
// removals, the totals are those of a book filled afresh with the same positions and summed once
// (counts exact, sums within rounding), and no receipt is left once the totals were asked.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { StoredPosition } from '../../src/sim/persistence.js';
import { PositionBook } from '../../src/sim/positionBook.js';
import { ChangeBatch } from '../../src/sim/accountState.js';

const clock = { toServer: (t: number) => t + 2 * 3_600_000 };
const T0 = Date.UTC(2026, 10, 18, 21, 0, 0);
const SYMBOLS = ['EURUSD', 'BTCUSD'] as const;

const position = (ticket: number, n: number): StoredPosition => ({
  ticket, symbol: SYMBOLS[n % 2]!, type: n % 3 ? 'Buy' : 'Sell', volume: (1 + (n % 50)) / 100, openPrice: 1 + (n % 997) / 1000,
  openTimeMsc: T0 + (n % 5) * 86_400_000, sl: n % 4 ? 0 : 0.5, tp: 0, magic: 0, comment: '', commission: 0, swapPaid: (n % 7) / 100,
});

const op = fc.record({ kind: fc.integer({ min: 0, max: 4 }), pick: fc.nat(), n: fc.nat({ max: 10_000 }) });

const totalsOf = (b: PositionBook) => [...b.totals].map(([k, t]) => [k, { ...t.buy }, { ...t.sell }]);

describe('positions map: running totals without a receipt per position', () => {
  it('equal a fresh sum of the same positions, and keep no receipt once asked', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 80 }), (ops) => {
        const book = new PositionBook(clock);
        let ticket = 100;
        for (const x of ops) {
          const tickets = [...book.keys()];
          const pick = tickets[x.pick % Math.max(1, tickets.length)];
          if (x.kind === 0 || pick === undefined) book.set(++ticket, position(ticket, x.n));
          else if (x.kind === 1) {
            // In place, as a partial close does (volume, swap paid).
            const p = book.get(pick)!;
            p.volume = Math.max(0.01, Math.round(p.volume * 50) / 100);
            p.swapPaid = (x.n % 11) / 100;
          } else if (x.kind === 2) book.set(pick, position(pick, x.n));
          else if (x.kind === 3) book.delete(pick);
          else void book.totals; // a question between changes
        }
        const asked = new Map(totalsOf(book).map(([k, ...sides]) => [k as string, sides as Record<string, number>[]]));
        expect((book as unknown as { receipts?: Map<number, unknown> }).receipts?.size ?? 0).toBe(0);
        const fresh = new PositionBook(clock);
        for (const [t, p] of book) fresh.set(t, { ...p });
        const want = new Map(totalsOf(fresh).map(([k, ...sides]) => [k as string, sides as Record<string, number>[]]));
        // A symbol no longer held keeps its (zero) totals; running sums drift by rounding (the book
        // rebuilds them after many changes): counts exact, sums within a few ulps of their size.
        for (const [k, sides] of asked) if (!want.has(k)) expect(sides.map((x) => [x.n, x.lots])).toEqual([[0, 0], [0, 0]]);
        for (const [k, sides] of want) {
          sides.forEach((exp, i) => {
            const got = asked.get(k)![i]!;
            expect(got.n).toBe(exp.n);
            for (const f of ['lots', 'lotsOpen', 'lotsRollover', 'swapPaid']) expect(Math.abs(got[f]! - exp[f]!)).toBeLessThanOrEqual(1e-9 * (1 + Math.abs(exp[f]!)));
          });
        }
        expect(book.maxOpenDay).toBeGreaterThanOrEqual(fresh.maxOpenDay); // an upper bound until a rebuild
      }),
      { numRuns: 300 },
    );
  });

  it('a change batch is made by an operation\'s first change, not ahead of it', () => {
    const b = new ChangeBatch();
    const held = () => (b as unknown as { batch?: unknown }).batch;
    expect(held()).toBeUndefined();
    expect(b.deals).toEqual([]);
    b.add({ balance: 5 }, false, false);
    expect(held()).toBeDefined();
    const { change } = b.take();
    expect(change).toMatchObject({ balance: 5, orders: [], positions: [], closedPositions: [], deals: [] });
    expect(held()).toBeUndefined();
    // A flush with a request alone still gets a batch of its own.
    const second = b.take().change;
    expect(second).toEqual({ orders: [], positions: [], closedPositions: [], deals: [] });
    expect(second).not.toBe(change);
  });
});
