// Rendezvous ownership (src/cluster/rendezvous.ts): every node computes the same owner, accounts
// spread evenly, a joining or leaving node moves only its own share, and nodes following their plans
// against a lease table (acquire only when free) converge on the targets without ever sharing an account.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planLeases, Rendezvous } from '../../src/cluster/rendezvous.js';

const nodeId = fc.stringMatching(/^[a-z0-9][a-z0-9.:-]{0,15}$/);
const nodeSet = (min: number, max: number) => fc.uniqueArray(nodeId, { minLength: min, maxLength: max });
const accounts = (n: number, salt: string) => Array.from({ length: n }, (_, i) => `${salt}-${i}`);

function spread(nodes: string[], ids: string[]): Map<string, number> {
  const hrw = new Rendezvous(nodes);
  const count = new Map(nodes.map((n) => [n, 0]));
  for (const a of ids) count.set(hrw.ownerOf(a)!, count.get(hrw.ownerOf(a)!)! + 1);
  return count;
}

describe('rendezvous ownership', () => {
  it('property: the owner does not depend on the order or repetition of the node list', () => {
    fc.assert(fc.property(nodeSet(1, 8), fc.array(fc.string(), { maxLength: 30 }), (nodes, ids) => {
      const a = new Rendezvous(nodes);
      const b = new Rendezvous([...nodes].reverse().concat(nodes));
      for (const id of ids) {
        expect(b.ownerOf(id)).toBe(a.ownerOf(id));
        expect(nodes).toContain(a.ownerOf(id));
      }
    }));
    expect(new Rendezvous([]).ownerOf('x')).toBeUndefined();
  });

  it('property: accounts spread evenly (every node within 30% of its fair share of 6000 accounts)', () => {
    // 6000 accounts over at most 8 nodes: a fair share of 750 or more, standard deviation at most ~26,
    // so 30% is more than 8 deviations: a failure is a skewed hash, not bad luck.
    fc.assert(fc.property(nodeSet(2, 8), fc.string({ maxLength: 6 }), (nodes, salt) => {
      const ids = accounts(6000, salt);
      const fair = ids.length / nodes.length;
      for (const [node, n] of spread(nodes, ids)) {
        expect(Math.abs(n - fair), `${node}: ${n} of ${ids.length} over ${nodes.length} nodes`).toBeLessThan(fair * 0.3);
      }
    }), { numRuns: 25 });
  });

  it('property: a node that joins takes accounts only to itself; one that leaves gives away only its own', () => {
    fc.assert(fc.property(nodeSet(2, 7), nodeId, fc.string({ maxLength: 6 }), (nodes, joiner, salt) => {
      fc.pre(!nodes.includes(joiner));
      const ids = accounts(500, salt);
      const before = new Rendezvous(nodes);
      const after = new Rendezvous([...nodes, joiner]);
      let moved = 0;
      for (const a of ids) {
        if (after.ownerOf(a) === before.ownerOf(a)) continue;
        moved++;
        expect(after.ownerOf(a), 'a join moves accounts only to the new node').toBe(joiner);
      }
      // Leaving is the same change backwards: only the leaver's accounts move.
      for (const a of ids) if (after.ownerOf(a) !== joiner) expect(before.ownerOf(a)).toBe(after.ownerOf(a));
      // And it does take some: about 1/(n+1) of them, far from none and far from all.
      expect(moved).toBeGreaterThan(0);
      expect(moved).toBeLessThan(ids.length * (2 / (nodes.length + 1)));
    }), { numRuns: 50 });
  });

  it('plans: acquire what targets me and I lack; release what targets another live node or no longer exists', () => {
    const ids = accounts(200, 'p');
    const hrw = new Rendezvous(['a', 'b']);
    const mine = ids.filter((id) => hrw.ownerOf(id) === 'a');
    const theirs = ids.filter((id) => hrw.ownerOf(id) === 'b');
    const plan = planLeases('a', ['b'], ids, new Set([mine[0]!, theirs[0]!, 'gone']));
    expect(plan.acquire.sort()).toEqual(mine.slice(1).sort());
    expect(plan.release.sort()).toEqual([theirs[0]!, 'gone'].sort());
    // Alone (the other node not live): everything targets me, nothing to release but the gone one.
    expect(planLeases('a', [], ids, new Set(['gone'])).release).toEqual(['gone']);
    expect(planLeases('a', [], ids, new Set()).acquire).toHaveLength(ids.length);
  });

  it('property: nodes joining, leaving and following their plans in any order never share an account and converge on the targets', () => {
    const ids = accounts(60, 'c');
    const step = fc.oneof(
      fc.record({ kind: fc.constant('round' as const), node: fc.nat(4) }),
      fc.record({ kind: fc.constant('join' as const), node: fc.nat(4) }),
      fc.record({ kind: fc.constant('leave' as const), node: fc.nat(4) }),
    );
    fc.assert(fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
      const names = ['n0', 'n1', 'n2', 'n3', 'n4'];
      const live = new Set(['n0']);
      const owner = new Map<string, string>(); // the lease table: an account's holder, absent when free
      const heldBy = (n: string) => new Set([...owner].filter(([, o]) => o === n).map(([a]) => a));
      const round = (n: string) => {
        if (!live.has(n)) return;
        const plan = planLeases(n, live, ids, heldBy(n));
        for (const a of plan.release) owner.delete(a);
        for (const a of plan.acquire) if (!owner.has(a)) owner.set(a, n); // acquire only when free
      };
      for (const s of steps) {
        const n = names[s.node]!;
        if (s.kind === 'round') round(n);
        else if (s.kind === 'join') live.add(n);
        else if (live.size > 1 && live.delete(n)) for (const a of heldBy(n)) owner.delete(a); // handover on leave
        for (const o of owner.values()) expect(live.has(o), 'an account is held only by a live node').toBe(true);
      }
      // Quiet now: two rounds of every live node settle every account on its target.
      for (let i = 0; i < 2; i++) for (const n of live) round(n);
      const hrw = new Rendezvous(live);
      for (const a of ids) expect(owner.get(a)).toBe(hrw.ownerOf(a));
    }), { numRuns: 200 });
  });
});
