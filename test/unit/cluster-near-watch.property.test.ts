// NearWatch (src/cluster/nearWatch.ts): a followed symbol is quiet (the owners withhold its relayed
// ticks) only while local delivery has kept up with what the relay reported, and stops being quiet
// as soon as the relay reports a tick more than the grace newer than the latest delivered here.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NearWatch } from '../../src/cluster/nearWatch.js';

const GRACE = 100;
const PAIRS: Array<[string, string]> = [['S1', 'EURUSD'], ['S1', 'BTCUSD'], ['S2', 'EURUSD']];

type Op =
  | { t: 'serve'; p: number }
  | { t: 'unserve'; p: number }
  | { t: 'local'; p: number; time: number }
  | { t: 'known'; p: number; time: number };

const pair = fc.nat(PAIRS.length - 1);
const time = fc.integer({ min: 0, max: 1_000 });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant('serve' as const), p: pair }),
  fc.record({ t: fc.constant('unserve' as const), p: pair }),
  fc.record({ t: fc.constant('local' as const), p: pair, time }),
  fc.record({ t: fc.constant('known' as const), p: pair, time }),
);

/** What the test knows of a pair: served, and the latest times since it was last served. */
interface Seen { served: boolean; near: number; known: number }

const key = ([s, y]: [string, string]) => `${s}/${y}`;

describe('NearWatch', () => {
  it('quiet only when served and local delivery is within the grace of everything known; a change is reported exactly when the quiet set changes', () => {
    fc.assert(fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
      const w = new NearWatch(GRACE);
      const seen = PAIRS.map((): Seen => ({ served: false, near: -Infinity, known: -Infinity }));
      let stalls = 0;
      for (const o of ops) {
        const [server, symbol] = PAIRS[o.p]!;
        const s = seen[o.p]!;
        const before = new Set(w.quiet().map(key));
        let changed: boolean;
        if (o.t === 'serve') {
          changed = w.serve(server, symbol);
          if (!s.served) s.known = -Infinity;
          s.served = true;
          s.near = -Infinity;
        } else if (o.t === 'unserve') {
          changed = w.unserve(server, symbol);
          s.served = false;
        } else if (o.t === 'local') {
          changed = w.local(server, symbol, o.time);
          if (s.served) s.near = Math.max(s.near, o.time);
        } else {
          changed = w.known(server, symbol, o.time);
          if (s.served) s.known = Math.max(s.known, o.time);
          if (changed) stalls++;
        }
        const after = new Set(w.quiet().map(key));
        expect(changed, JSON.stringify(o)).toBe(before.size !== after.size || [...after].some((k) => !before.has(k)));
        expect(w.quietSize).toBe(after.size);
        expect(w.stalls).toBe(stalls);
        PAIRS.forEach((p, i) => {
          const q = after.has(key(p));
          const x = seen[i]!;
          // Quiet: served, delivered here since, and not behind what is known by more than the grace.
          if (q) {
            expect(x.served).toBe(true);
            expect(x.near).toBeGreaterThan(-Infinity);
            expect(x.known - x.near).toBeLessThanOrEqual(GRACE);
          }
          if (i !== o.p) return;
          // Caught up with everything known: quiet at once.
          if (o.t === 'local' && x.served) expect(q).toBe(x.near >= x.known || before.has(key(p)));
          // Known more than the grace ahead: not quiet.
          if (o.t === 'known' && x.served && x.known - x.near > GRACE) expect(q).toBe(false);
          if (o.t === 'serve' || o.t === 'unserve') expect(q).toBe(false);
        });
      }
    }), { numRuns: 400 });
  });

  it('a source that stops delivering: quiet, then asked for again once the relay\'s pulses are past the grace; quiet again once it catches up', () => {
    const w = new NearWatch(1_000);
    w.serve('S', 'X');
    expect(w.known('S', 'X', 10_000)).toBe(false); // a relayed tick before the source delivers
    expect(w.local('S', 'X', 9_500)).toBe(false); // behind it: not quiet yet
    expect(w.local('S', 'X', 10_000)).toBe(true);
    expect(w.quiet()).toEqual([['S', 'X']]);
    expect(w.known('S', 'X', 11_000)).toBe(false); // a pulse a second ahead: within the grace
    expect(w.known('S', 'X', 11_001)).toBe(true); // past it: the relay's copies again
    expect(w.quiet()).toEqual([]);
    expect(w.stalls).toBe(1);
    expect(w.local('S', 'X', 11_000)).toBe(false); // still behind the relay's latest
    expect(w.local('S', 'X', 11_001)).toBe(true);
  });

  it('ticks of pairs no local account serves are ignored', () => {
    const w = new NearWatch();
    expect(w.local('S', 'X', 1)).toBe(false);
    expect(w.known('S', 'X', 5_000)).toBe(false);
    expect(w.quiet()).toEqual([]);
    expect(w.served()).toEqual([]);
  });
});
