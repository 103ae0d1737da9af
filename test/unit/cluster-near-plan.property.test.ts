// A node's near sources (src/cluster/nearPlan.ts): whatever its followers want and drop, whatever
// accounts come and go and whatever the shards refuse, in any order, the shards (modelled as
// src/runtime/hosts/streamSources.ts keeps them: a set of symbols per account, dropped with the
// account when it leaves, all of a shard's when it restarts) hold exactly one source per wanted
// (server, symbol) that a local account of that server can serve, and nothing else. With a market-data
// login for a server (QUOTE_LOGINS_FILE), the node's quote session of it is one more source there.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NearPlan, quoteSourceId, type NearCommand } from '../../src/cluster/nearPlan.js';

const SERVERS = ['S1', 'S2'];
const SYMBOLS = ['EURUSD', 'BTCUSD'];
const ACCOUNTS = ['a', 'b', 'c', 'd'];
/** Two shards: a and b on the first, c and d on the second. */
const shardOf = (id: string) => (id < 'c' ? 0 : 1);

type Step =
  | { t: 'want' | 'drop'; server: number; symbol: number }
  | { t: 'add'; account: number; server: number }
  | { t: 'remove'; account: number }
  /** account 4: the quote session of S2 (when S2 has a quote login). */
  | { t: 'refuse'; account: number }
  | { t: 'restart'; shard: number };
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ t: fc.constantFrom('want' as const, 'drop' as const), server: fc.nat(1), symbol: fc.nat(1) }),
  fc.record({ t: fc.constant('add' as const), account: fc.nat(3), server: fc.nat(1) }),
  fc.record({ t: fc.constant('remove' as const), account: fc.nat(3) }),
  fc.record({ t: fc.constant('refuse' as const), account: fc.nat(4) }),
  fc.record({ t: fc.constant('restart' as const), shard: fc.nat(1) }),
);

describe.each([
  { quotes: [] as string[], title: 'no quote login' },
  { quotes: ['S2'], title: 'a quote login for S2' },
])('NearPlan, $title', ({ quotes }) => {
  const quoteServers = new Set(quotes);
  /** The server a source serves: an account's, or its quote session's. */
  const quoteOf = (id: string) => SERVERS.find((srv) => quoteServers.has(srv) && quoteSourceId(srv) === id);
  it('the shards hold one source per wanted symbol a local account of its server (or its quote session) can serve, and nothing else', () => {
    fc.assert(fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
      const plan = new NearPlan(quoteServers);
      /** What the shards hold: account -> `${server}|${symbol}`. */
      const shards = new Map<string, Set<string>>();
      const wants = new Map<string, number>();
      const local = new Map<string, string>();
      /** Accounts the test made refuse (as a shard whose account runs on another server now). */
      const refusing = new Map<string, Set<string>>();
      const apply = (cmds: NearCommand[]) => {
        for (const c of cmds) {
          expect(local.get(c.accountId) ?? quoteOf(c.accountId)).toBe(c.server);
          const held = shards.get(c.accountId) ?? new Set<string>();
          shards.set(c.accountId, held);
          const k = `${c.server}|${c.symbol}`;
          if (c.op === 'source') held.add(k);
          else {
            expect(held.has(k)).toBe(true);
            held.delete(k);
          }
        }
      };
      for (const s of steps) {
        if (s.t === 'want' || s.t === 'drop') {
          const [server, symbol] = [SERVERS[s.server]!, SYMBOLS[s.symbol]!];
          const k = `${server}|${symbol}`;
          const n = wants.get(k) ?? 0;
          if (s.t === 'drop' && n === 0) continue; // the follower drops only what it wanted
          wants.set(k, s.t === 'want' ? n + 1 : n - 1);
          if (wants.get(k) === 0) {
            wants.delete(k);
            // A want let go and wanted again is a new want: the plan asks its accounts afresh
            // (NearPlan.drop forgets the refusals of it; an account still unable refuses again).
            for (const r of refusing.values()) r.delete(k);
          }
          apply(s.t === 'want' ? plan.want(server, symbol) : plan.drop(server, symbol));
        } else if (s.t === 'add') {
          const id = ACCOUNTS[s.account]!;
          if (local.has(id)) continue; // adopted once until it leaves
          local.set(id, SERVERS[s.server]!);
          refusing.delete(id);
          apply(plan.added(id, SERVERS[s.server]!));
        } else if (s.t === 'remove') {
          const id = ACCOUNTS[s.account]!;
          local.delete(id);
          refusing.delete(id);
          shards.delete(id); // its shard released it, sources with it
          apply(plan.removed(id));
        } else if (s.t === 'refuse') {
          // The account's shard answers ok:false to what it serves (and dropped it).
          const id = s.account === 4 ? quoteSourceId('S2') : ACCOUNTS[s.account]!;
          const held = [...(shards.get(id) ?? [])];
          if (!held.length) continue;
          const [server, symbol] = held[0]!.split('|') as [string, string];
          shards.get(id)!.delete(held[0]!);
          refusing.set(id, new Set([...(refusing.get(id) ?? []), held[0]!]));
          apply(plan.refused(id, server, symbol));
        } else if (s.t === 'restart') {
          // The shard's new thread holds nothing; the other shard keeps what it holds.
          const shard = s.shard;
          const restarted = (id: string) => shardOf(id) === shard;
          for (const id of shards.keys()) if (restarted(id)) shards.delete(id);
          apply(plan.resend(restarted));
        }
      }
      // Exactly one source per wanted (server, symbol) with a local, non-refusing account on its server.
      const sources = new Map<string, string[]>();
      for (const [id, held] of shards) for (const k of held) sources.set(k, [...(sources.get(k) ?? []), id]);
      for (const k of sources.keys()) expect(wants.has(k)).toBe(true);
      for (const k of wants.keys()) {
        const server = k.split('|')[0]!;
        const able = [...local, ...quotes.map((srv) => [quoteSourceId(srv), srv] as const)]
          .filter(([id, srv]) => srv === server && !refusing.get(id)?.has(k)).map(([id]) => id);
        const at = sources.get(k) ?? [];
        expect(at.length).toBe(able.length > 0 ? 1 : 0);
        if (at.length) expect(able).toContain(at[0]);
        expect(plan.sourceOf(server, k.split('|')[1]!)).toBe(at[0]);
      }
      expect(plan.counts()).toStrictEqual({
        wanted: wants.size, served: [...wants.keys()].filter((k) => sources.has(k)).length,
        quoted: [...wants.keys()].filter((k) => quoteOf(sources.get(k)?.[0] ?? '') !== undefined).length,
      });
    }), { numRuns: 500 });
  });
});
