// Who owns what (src/cluster/rendezvous.ts): bounded-load rendezvous over the live nodes, starting
// from who holds what. Every account gets one live owner, a stable spread differs by one at most, a
// joining node takes only its share and a leaving one gives away only its own, nodes that read the
// lease table in the middle of a rebalance agree, and nodes following their plans against a lease
// table (acquire only when free) converge on an even spread without ever sharing an account.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planLeases, Rendezvous, targetOwners } from '../../src/cluster/rendezvous.js';

const nodeId = fc.stringMatching(/^[a-z0-9][a-z0-9.:-]{0,15}$/);
const nodeSet = (min: number, max: number) => fc.uniqueArray(nodeId, { minLength: min, maxLength: max });
const accounts = (n: number, salt: string) => Array.from({ length: n }, (_, i) => `${salt}-${i}`);

/** Accounts per node (every node listed, 0 included). */
function counts(nodes: readonly string[], owners: ReadonlyMap<string, string>): number[] {
  return nodes.map((n) => [...owners.values()].filter((o) => o === n).length);
}

/** A spread reached the way a cluster reaches one: the first node alone, then the others joining one by one. */
function grown(nodes: readonly string[], ids: readonly string[]): Map<string, string> {
  let owners = new Map<string, string>();
  for (let k = 1; k <= nodes.length; k++) owners = targetOwners(nodes.slice(0, k), ids, owners);
  return owners;
}

/** Holders as a lease table may show them: random live or dead nodes, some accounts free, some gone. */
const tableState = fc.record({
  nodes: nodeSet(1, 6),
  dead: nodeSet(0, 2),
  size: fc.nat(40),
  salt: fc.string({ maxLength: 4 }),
  picks: fc.array(fc.nat(), { minLength: 45, maxLength: 45 }),
}).map(({ nodes, dead, size, salt, picks }) => {
  const ids = accounts(size, salt);
  const pool = [...nodes, ...dead.filter((d) => !nodes.includes(d))];
  const holders = new Map<string, string>();
  // One slot beyond the pool leaves the account free; the ids beyond `size` are accounts gone.
  accounts(45, salt).forEach((a, i) => {
    const p = picks[i]! % (pool.length + 1);
    if (p < pool.length) holders.set(a, pool[p]!);
  });
  return { nodes, ids, holders };
});

describe('who owns what', () => {
  it('property: the rendezvous order does not depend on the order or repetition of the node list', () => {
    fc.assert(fc.property(nodeSet(1, 8), fc.array(fc.string(), { maxLength: 30 }), (nodes, ids) => {
      const a = new Rendezvous(nodes);
      const b = new Rendezvous([...nodes].reverse().concat(nodes));
      // Whole lists in one expect() each (one per id was most of the file's 43,000 expect() calls).
      expect(ids.map((id) => b.ownerOf(id))).toEqual(ids.map((id) => a.ownerOf(id)));
      expect(ids.map((id) => a.ownerOf(id)).filter((o) => !nodes.includes(o!)), 'owners not in the node list').toEqual([]);
    }));
    expect(new Rendezvous([]).ownerOf('x')).toBeUndefined();
    expect(targetOwners([], ['x'], new Map()).size).toBe(0);
  });

  it('property: from any lease table, every account that exists gets exactly one owner, a live node, and the most and fewest accounts of a node differ by one at most', () => {
    fc.assert(fc.property(tableState, ({ nodes, ids, holders }) => {
      const owners = targetOwners(nodes, ids, holders);
      expect([...owners.keys()].sort()).toEqual([...ids].sort());
      expect([...owners.values()].filter((o) => !nodes.includes(o)), 'owners not in the node list').toEqual([]);
      const c = counts(nodes, owners);
      expect(Math.max(...c) - Math.min(...c), `${c}`).toBeLessThanOrEqual(1);
      // The same answer whatever the order of the node list.
      expect(targetOwners([...nodes].reverse(), [...ids].reverse(), holders)).toEqual(owners);
    }), { numRuns: 300 });
  });

  it('property: an answer carried out (in full or in any part: some accounts moved, some released and not yet taken) gives the same answer again: no flapping', () => {
    fc.assert(fc.property(tableState, fc.array(fc.nat(2), { minLength: 45, maxLength: 45 }), ({ nodes, ids, holders }, steps) => {
      const target = targetOwners(nodes, ids, holders);
      expect(targetOwners(nodes, ids, target)).toEqual(target);
      const partial = new Map<string, string>();
      ids.forEach((a, i) => {
        const before = holders.get(a);
        const after = target.get(a)!;
        // An account to move is still with its holder (0), released and free (1), or taken (2).
        const step = before === after ? 2 : steps[i]!;
        if (step === 2) partial.set(a, after);
        else if (step === 0 && before !== undefined) partial.set(a, before);
      });
      expect(targetOwners(nodes, ids, partial)).toEqual(target);
    }), { numRuns: 300 });
  });

  it('property: a node that joins takes only its share (every account that moves, moves to it); one that leaves gives away only its own', () => {
    fc.assert(fc.property(nodeSet(1, 7), nodeId, fc.nat(80), fc.string({ maxLength: 4 }), (nodes, joiner, size, salt) => {
      fc.pre(!nodes.includes(joiner));
      const ids = accounts(size, salt);
      const before = grown(nodes, ids);
      const after = targetOwners([...nodes, joiner], ids, before);
      const moved = ids.filter((a) => after.get(a) !== before.get(a));
      expect(moved.filter((a) => after.get(a) !== joiner), 'a join moves accounts only to the new node').toEqual([]);
      expect(moved.length).toBe(counts([joiner], after)[0]);
      expect(moved.length).toBeGreaterThanOrEqual(Math.floor(size / (nodes.length + 1)));
      // Leaving (a handover: its leases released): only the leaver's accounts move.
      for (const leaver of [...nodes, joiner]) {
        const rest = [...nodes, joiner].filter((n) => n !== leaver);
        if (rest.length === 0) continue;
        const left = targetOwners(rest, ids, new Map([...after].filter(([, o]) => o !== leaver)));
        expect(ids.filter((a) => after.get(a) !== leaver && left.get(a) !== after.get(a)), 'a leave moves only the leaver\'s accounts').toEqual([]);
      }
    }), { numRuns: 200 });
  });

  it('12 accounts over 3 nodes: 4 each, however the nodes came', () => {
    const ids = accounts(12, 'acct');
    const nodes = ['node-a', 'node-b', 'node-c'];
    expect(counts(nodes, targetOwners(nodes, ids, new Map()))).toEqual([4, 4, 4]);
    expect(counts(nodes, grown(nodes, ids))).toEqual([4, 4, 4]);
    expect(counts(nodes, grown([...nodes].reverse(), ids))).toEqual([4, 4, 4]);
  });

  it('plans: acquire what targets me and I lack; release what targets another live node or no longer exists', () => {
    const ids = accounts(200, 'p');
    const target = targetOwners(['a', 'b'], ids, new Map());
    const mine = ids.filter((id) => target.get(id) === 'a');
    const theirs = ids.filter((id) => target.get(id) === 'b');
    expect(mine.length).toBe(100);
    const holders = new Map([[mine[0]!, 'a'], [theirs[0]!, 'a'], ['gone', 'a']]);
    // a holds one of b's: b's share of what is left changes, so compare with what the table gives.
    const now = targetOwners(['a', 'b'], ids, holders);
    const plan = planLeases('a', ['b'], ids, new Set(holders.keys()), holders);
    expect(plan.acquire.sort()).toEqual(ids.filter((id) => now.get(id) === 'a' && !holders.has(id)).sort());
    expect(plan.release.sort()).toEqual([...holders.keys()].filter((id) => now.get(id) !== 'a').sort());
    expect(plan.release).toContain('gone');
    // Alone (the other node not live): everything targets me, nothing to release but the gone one.
    expect(planLeases('a', [], ids, new Set(['gone']), new Map([['gone', 'a']])).release).toEqual(['gone']);
    expect(planLeases('a', [], ids, new Set(), new Map()).acquire).toHaveLength(ids.length);
    // b's accounts held by b (live) are kept by b: a acquires none of them.
    const bHolds = new Map(theirs.map((id) => [id, 'b']));
    expect(planLeases('a', ['b'], ids, new Set(), bHolds).acquire.sort()).toEqual([...mine].sort());
  });

  it('property: nodes joining, leaving, crashing and following their plans in any order never share an account and converge on an even spread that stays put', () => {
    const ids = accounts(23, 'c');
    const step = fc.oneof(
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('round' as const), node: fc.nat(4) }) },
      fc.record({ kind: fc.constant('join' as const), node: fc.nat(4) }),
      fc.record({ kind: fc.constant('leave' as const), node: fc.nat(4) }),
      fc.record({ kind: fc.constant('crash' as const), node: fc.nat(4) }),
      fc.record({ kind: fc.constant('expire' as const), node: fc.nat(4) }),
    );
    fc.assert(fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
      const names = ['n0', 'n1', 'n2', 'n3', 'n4'];
      const live = new Set(['n0']);
      const table = new Map<string, string>(); // account -> holder of its unexpired lease; absent when free
      const heldBy = (n: string) => new Set([...table].filter(([, o]) => o === n).map(([a]) => a));
      let released = 0;
      const round = (n: string) => {
        if (!live.has(n)) return;
        const plan = planLeases(n, live, ids, heldBy(n), new Map(table));
        for (const a of plan.release) table.delete(a);
        released += plan.release.length;
        for (const a of plan.acquire) if (!table.has(a)) table.set(a, n); // acquire only when free
      };
      for (const s of steps) {
        const n = names[s.node]!;
        if (s.kind === 'round') round(n);
        else if (s.kind === 'join') live.add(n);
        else if (s.kind === 'leave') {
          if (live.size > 1 && live.delete(n)) for (const a of heldBy(n)) table.delete(a); // handover
        } else if (s.kind === 'crash') {
          if (live.size > 1) live.delete(n); // its leases run until they expire
        } else for (const [a, o] of table) if (!live.has(o)) table.delete(a); // the dead's leases expire
      }
      for (const [a, o] of table) if (!live.has(o)) table.delete(a);
      // Quiet now: two rounds of every live node settle every account, evenly.
      for (let i = 0; i < 2; i++) for (const n of live) round(n);
      expect([...table.keys()].sort()).toEqual([...ids].sort());
      const c = counts([...live], table);
      expect(Math.max(...c) - Math.min(...c), `${c}`).toBeLessThanOrEqual(1);
      // And it stays: more rounds move nothing.
      const settled = new Map(table);
      const before = released;
      for (const n of live) round(n);
      expect(table).toEqual(settled);
      expect(released).toBe(before);
    }), { numRuns: 300 });
  });

  it('property: a cold start (every node live, none holding anything, rounds in any order) releases nothing', () => {
    fc.assert(fc.property(nodeSet(1, 5), fc.nat(60), fc.array(fc.nat(4), { maxLength: 30 }), (nodes, size, order) => {
      const ids = accounts(size, 'cold');
      const table = new Map<string, string>();
      const rounds = [...order.map((i) => nodes[i % nodes.length]!), ...nodes];
      for (const n of rounds) {
        const held = new Set([...table].filter(([, o]) => o === n).map(([a]) => a));
        const plan = planLeases(n, nodes, ids, held, new Map(table));
        expect(plan.release).toEqual([]);
        for (const a of plan.acquire) if (!table.has(a)) table.set(a, n);
      }
      expect(table).toEqual(targetOwners(nodes, ids, new Map()));
    }), { numRuns: 200 });
  });
});
