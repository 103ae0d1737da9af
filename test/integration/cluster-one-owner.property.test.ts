// The core promise of leases (issue 20: one owner per account, fenced), as a property over random
// schedules against a real PostgreSQL: three lease keepers on real time tick in random groups,
// pause past their lease, crash, leave with a handover and come back, and at no moment, sampled
// every few milliseconds throughout, do two of them both hold an account (leaseOf), nor does one
// hold an account PostgreSQL gives to another. Afterwards, quiet rounds settle every account on
// exactly one node.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LeaseKeeper, monotonicClock } from '../../src/cluster/leaseKeeper.js';
import { leaseRows } from '../../src/cluster/leases.js';
import { postgresForFile } from '../helpers/postgres.js';

const server = postgresForFile();
let run = 0;


const LEASE_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Step =
  | { kind: 'tick'; nodes: number[] }
  | { kind: 'pause'; ms: number }
  | { kind: 'crash' | 'leave' | 'return'; node: number };

describe('one owner per account', () => {
  it('property: whatever the schedule of rounds, pauses, crashes and handovers, no two nodes ever hold one account', async () => {
    const step: fc.Arbitrary<Step> = fc.oneof(
      { weight: 5, arbitrary: fc.record({ kind: fc.constant('tick' as const), nodes: fc.uniqueArray(fc.nat(2), { minLength: 1, maxLength: 3 }) }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('pause' as const), ms: fc.integer({ min: 50, max: LEASE_MS + 200 }) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('crash' as const, 'leave' as const, 'return' as const), node: fc.nat(2) }) },
    );
    await fc.assert(fc.asyncProperty(fc.array(step, { minLength: 4, maxLength: 14 }), async (steps) => {
      const accounts = Array.from({ length: 12 }, (_, i) => `r${++run}-${i}`);
      const make = (i: number) => new LeaseKeeper({ db: server.pool, nodeId: `n${run}-${i}`, leaseMs: LEASE_MS, clock: monotonicClock, accounts: () => accounts });
      const keepers: Array<LeaseKeeper | undefined> = [0, 1, 2].map(make);
      const violations: string[] = [];
      const check = () => {
        for (const a of accounts) {
          const holders = keepers.flatMap((k, i) => (k?.leaseOf(a) ? [i] : []));
          if (holders.length > 1) violations.push(`${a} held by nodes ${holders.join(', ')}`);
        }
      };
      const sampler = setInterval(check, 3);
      try {
        for (const s of steps) {
          if (s.kind === 'tick') await Promise.all(s.nodes.map((i) => keepers[i]?.tick()));
          else if (s.kind === 'pause') await sleep(s.ms);
          else if (s.kind === 'crash') {
            await keepers[s.node]?.stop({ handover: false });
            keepers[s.node] = undefined;
          } else if (s.kind === 'leave') {
            await keepers[s.node]?.stop({ handover: true });
            keepers[s.node] = undefined;
          } else keepers[s.node] ??= make(s.node);
          check();
          // What a node holds, PostgreSQL gives to it (at the epoch it holds).
          const rows = new Map((await leaseRows(server.pool, accounts)).map((r) => [r.accountId, r]));
          for (const [i, k] of keepers.entries()) {
            for (const l of k?.held() ?? []) {
              const row = rows.get(l.accountId);
              // Read after the held() snapshot: a lease that lapsed in between is no longer held.
              if (row?.owner !== `n${run}-${i}` || row.epoch !== l.epoch) {
                if (k!.leaseOf(l.accountId)) violations.push(`${l.accountId}: node ${i} holds epoch ${l.epoch}, PostgreSQL says ${row?.owner}@${row?.epoch}`);
              }
            }
          }
        }
        // Quiet: the nodes left running settle every account on exactly one of them.
        const alive = keepers.filter((k): k is LeaseKeeper => k !== undefined);
        if (alive.length > 0) {
          await sleep(LEASE_MS + 100); // leases of crashed nodes run out
          // Rounds until settled (at least three), not exactly three: on a loaded machine a round can
          // outlast the 500 ms lease, and a lapsed lease is taken again only at a later round.
          const owned = () => alive.flatMap((k) => k.held().map((l) => l.accountId)).sort();
          const deadline = Date.now() + 15_000;
          for (let r = 0; r < 3 || (owned().join() !== [...accounts].sort().join() && Date.now() < deadline); r++) {
            for (const k of alive) await k.tick();
          }
          expect(owned()).toEqual([...accounts].sort());
        }
      } finally {
        clearInterval(sampler);
        await Promise.all(keepers.map((k) => k?.stop({ handover: false })));
      }
      expect(violations).toEqual([]);
    }), { numRuns: 8 });
  }, 180_000);
});
