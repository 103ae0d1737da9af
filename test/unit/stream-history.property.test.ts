// The pure resume logic of the account stream (src/stream/history.ts) under random schedules of
// events, clock steps and disconnects: a client that resumes with the position of the last frame it
// got receives every account event exactly once and in order whenever the gateway says
// recovered:true, and recovered:false exactly when what it missed is no longer all held (too many
// events, or too old). After recovered:false it takes a snapshot at the current position.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AccountHistory, parseSince } from '../../src/stream/history.js';

type Op = { kind: 'events'; n: number } | { kind: 'tick'; ms: number } | { kind: 'drop' } | { kind: 'resume' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('events' as const), n: fc.integer({ min: 1, max: 12 }) }),
  fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 400 }) }),
  fc.record({ kind: fc.constant('drop' as const) }),
  fc.record({ kind: fc.constant('resume' as const) }),
);

const seqOf = (frame: string) => (JSON.parse(frame) as { seq: number }).seq;

describe('account history: resume', () => {
  it('exactly-once, in-order delivery of account events over random disconnect schedules', () => {
    fc.assert(fc.property(
      fc.array(op, { minLength: 1, maxLength: 80 }), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 100, max: 2_000 }),
      (ops, maxEvents, maxAgeMs) => {
        let now = 1_000_000;
        const h = new AccountHistory('ep', 0, { maxEvents, maxAgeMs });
        const at = new Map<number, number>(); // seq -> time it happened (the model)
        const delivered: number[] = []; // seqs the client applied, in order
        let connected = true;
        let cursor = 0; // the client's position: the last seq it applied (or its snapshot's)
        let snapshots = 0;
        for (const o of [...ops, { kind: 'resume' } as Op]) {
          if (o.kind === 'tick') now += o.ms;
          else if (o.kind === 'drop') connected = false;
          else if (o.kind === 'events') {
            for (let i = 0; i < o.n; i++) {
              const e = h.append('TRADE', `{"i":${i}}`, now);
              at.set(e.seq, now);
              if (connected) {
                delivered.push(e.seq);
                cursor = e.seq;
              }
            }
          } else if (!connected) {
            const r = h.replay({ epoch: 'ep', seq: cursor }, now);
            // The model: every missed event still held, by count and by age?
            const missed = [...at.keys()].filter((s) => s > cursor);
            const held = missed.length === 0 || (
              h.seq - missed[0]! < maxEvents && at.get(missed[0]!)! >= now - maxAgeMs
            );
            expect(r.recovered).toBe(held);
            if (r.recovered) {
              const seqs = r.entries.map((e) => seqOf(e.frame));
              expect(seqs).toEqual(missed);
              delivered.push(...seqs);
            } else {
              snapshots++;
            }
            cursor = h.seq; // replayed up to here, or a snapshot at the current position
            connected = true;
          }
        }
        // Between snapshots, strictly consecutive: no duplicate, no gap, no reordering.
        if (snapshots === 0) expect(delivered).toEqual([...at.keys()]);
        for (let i = 1; i < delivered.length; i++) expect(delivered[i]!).toBeGreaterThan(delivered[i - 1]!);
        expect(new Set(delivered).size).toBe(delivered.length);
      },
    ), { numRuns: 400 });
  });

  it('another epoch, or a position it never reached, is not recovered', () => {
    const h = new AccountHistory('ep', 0, { maxEvents: 10, maxAgeMs: 1_000 });
    h.append('TRADE', '{}', 0);
    expect(h.replay({ epoch: 'other', seq: 0 }, 0).recovered).toBe(false);
    expect(h.replay({ epoch: 'ep', seq: 2 }, 0).recovered).toBe(false);
    expect(h.replay({ epoch: 'ep', seq: 1 }, 0)).toEqual({ recovered: true, entries: [] });
    // A history read back with a hole (a batch whose write failed) does not vouch across it.
    const holed = new AccountHistory('ep', 4, { maxEvents: 10, maxAgeMs: 1_000 }, [1, 2, 4].map((seq) => ({ seq, at: 0, frame: `{"seq":${seq}}` })));
    expect(holed.replay({ epoch: 'ep', seq: 1 }, 0).recovered).toBe(false);
    expect(holed.replay({ epoch: 'ep', seq: 2 }, 0).recovered).toBe(false);
    expect(holed.replay({ epoch: 'ep', seq: 3 }, 0)).toMatchObject({ recovered: true, entries: [{ seq: 4 }] });
  });

  it('since parses <epoch>:<seq> only', () => {
    expect(parseSince('m3x9q2k7a1:41')).toEqual({ epoch: 'm3x9q2k7a1', seq: 41 });
    expect(parseSince('a:0')).toEqual({ epoch: 'a', seq: 0 });
    for (const bad of ['', ':1', 'a:', 'a:01', 'a:-1', 'a:1.5', 'a:b:1', 'a b:1', `${'x'.repeat(33)}:1`, 'a:99999999999999999']) {
      expect(parseSince(bad), bad).toBeNull();
    }
  });
});
