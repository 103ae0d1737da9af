// The lease order of an account's stream history (src/cluster/leaseOrder.ts) against a model of
// owners and their late writes: each owner's tenure begins with a fence restating the head it
// continues and numbers frames on from it; a write of an earlier owner (a number it had past what
// it stored before the next owner's fence, any content) can be stored anywhere after that fence
// ("ghosts", as a dead owner's publish still in a kernel buffer is), and a frame can be stored
// again (a retried store's republish). A replay read from any point on is either not whole or
// exactly the owners' frames, never another frame at a number; one read from the first owner's
// frame after its position is whole, and so is one read from the first stored message after it
// (what the bisect finds) unless that is a late write.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LeaseOrder, ReplayTaker, type LeasedMessage } from '../../src/cluster/leaseOrder.js';

interface Stored extends LeasedMessage { frame: string; ghost: boolean }

const EPOCH = 'e1';

/** tenures: each owner's count of frames; ghosts: [tenure the ghost lands in (after its fence),
 *  position among that tenure's messages, how far past what its owner stored, an earlier owner];
 *  again: frames stored a second time (their index among the owners' frames, where it lands). */
function history(tenures: number[], ghosts: Array<[number, number, number, number]>, again: Array<[number, number]>): { stored: Stored[]; truth: Stored[]; head: number } {
  const stored: Stored[] = [{ epoch: EPOCH, seq: 0, lease: 1, frame: '', ghost: false }];
  const truth: Stored[] = [];
  let head = 0;
  /** fenced[t]: the seq tenure t's fence restated (what its predecessors stored). */
  const fenced: number[] = [];
  tenures.forEach((count, t) => {
    const lease = t + 1;
    const region: Stored[] = [];
    fenced.push(head);
    if (t > 0) region.push({ epoch: EPOCH, seq: head, lease, fence: true, headLease: truth.at(-1)?.lease ?? 1, frame: '', ghost: false });
    for (let i = 0; i < count; i++) {
      const f = { epoch: EPOCH, seq: ++head, lease, frame: `L${lease}-${head}`, ghost: false };
      region.push(f);
      truth.push(f);
    }
    // Late writes of earlier owners, after this tenure's fence.
    for (const [in_, at, past, by] of ghosts) {
      if (t === 0 || in_ % tenures.length !== t) continue;
      const owner = by % t; // an earlier tenure: its numbers past what the next one's fence restated
      const seq = fenced[owner + 1]! + 1 + (past % 4);
      region.splice(1 + (at % region.length), 0, { epoch: EPOCH, seq, lease: owner + 1, frame: `ghost-${owner}-${seq}`, ghost: true });
    }
    stored.push(...region);
  });
  for (const [which, at] of again) {
    if (truth.length === 0) break;
    const f = truth[which % truth.length]!;
    const from = stored.indexOf(f);
    // Stored again later in its owner's tenure (before the next fence): a republish.
    let end = from + 1;
    while (end < stored.length && !(stored[end]!.fence && (stored[end]!.lease ?? 0) > (f.lease ?? 0))) end++;
    stored.splice(from + 1 + (at % (end - from)), 0, { ...f });
  }
  return { stored, truth, head };
}

/** A replay reads up to the head (JetStreamHistory.head: the last message that is not a late write). */
function read(stored: readonly Stored[], from: number, since: number): ReplayTaker {
  const end = stored.findLastIndex((m) => !m.ghost);
  const taker = new ReplayTaker(EPOCH, since);
  for (const m of stored.slice(from, end + 1)) taker.take(m, 0, () => m.frame);
  return taker;
}

const arbHistory = fc.record({
  tenures: fc.array(fc.nat({ max: 6 }), { minLength: 1, maxLength: 5 }),
  ghosts: fc.array(fc.tuple(fc.nat(), fc.nat(), fc.nat(), fc.nat()), { maxLength: 8 }),
  again: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 3 }),
}).map(({ tenures, ghosts, again }) => history(tenures, ghosts, again));

describe('ReplayTaker (the lease order of a replay)', () => {
  it('read from the first stored message after the position: whole unless that is a late write, and then exactly the owners\' frames', () => {
    fc.assert(fc.property(arbHistory, fc.nat(), ({ stored, truth, head }, s) => {
      const since = s % (head + 1);
      const from = stored.findIndex((m) => m.seq > since && !m.fence);
      if (from < 0) return;
      const t = read(stored, from, since);
      if (!stored[from]!.ghost) expect(t.wholeTo(head)).toBe(true);
      if (t.wholeTo(head)) expect(t.out.map((e) => e.frame)).toEqual(truth.filter((f) => f.seq > since).map((f) => f.frame));
    }), { numRuns: 1_000 });
  });

  it('read from any point the bisect can stop at (a message after the position, the one before it not): whole only when exactly the owners\' frames (never another frame at a number)', () => {
    fc.assert(fc.property(arbHistory, fc.nat(), fc.nat(), ({ stored, truth, head }, s, p) => {
      const since = s % (head + 1);
      const end = stored.findLastIndex((m) => !m.ghost);
      const stops = stored.map((_, i) => i).filter((i) => i <= end && stored[i]!.seq > since && (i === 0 || stored[i - 1]!.seq <= since));
      if (stops.length === 0) return;
      const t = read(stored, stops[p % stops.length]!, since);
      if (t.wholeTo(head)) expect(t.out.map((e) => e.frame)).toEqual(truth.filter((f) => f.seq > since).map((f) => f.frame));
    }), { numRuns: 2_000 });
  });

  it('read from the first owner\'s frame after the position: whole', () => {
    fc.assert(fc.property(arbHistory, fc.nat(), ({ stored, truth, head }, s) => {
      const since = s % (head + 1);
      const first = truth.find((f) => f.seq === since + 1);
      if (!first) return;
      const t = read(stored, stored.indexOf(first), since);
      expect(t.wholeTo(head)).toBe(true);
      expect(t.out.map((e) => e.frame)).toEqual(truth.filter((f) => f.seq > since).map((f) => f.frame));
    }), { numRuns: 500 });
  });
});

describe('LeaseOrder', () => {
  it('a message with no lease (a node of an earlier version) is taken as it comes; a lower lease after a higher one is stale', () => {
    const o = new LeaseOrder();
    expect(o.meet({})).toBe('current');
    expect(o.meet({ lease: 3 })).toBe('current'); // the first met
    expect(o.meet({})).toBe('current');
    expect(o.meet({ lease: 2 })).toBe('stale');
    expect(o.meet({ lease: 5 })).toBe('newer');
    expect(o.lease).toBe(5);
  });
});
