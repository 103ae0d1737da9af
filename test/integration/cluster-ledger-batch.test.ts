// The ledger's group commit (src/cluster/groupCommit.ts) against a real PostgreSQL: claims and
// outcomes made while one statement is out leave together as one statement, and each call gets the
// answer it would get alone; a batch that meets a locked lease row runs its calls alone, waiting as
// they always did, instead of failing them.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdempotencyLedger, type ClaimOutcome } from '../../src/cluster/idempotencyLedger.js';
import { acquireLeases, type Lease } from '../../src/cluster/leases.js';
import type { Queryable } from '../../src/cluster/pgPool.js';
import { postgresForFile } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

const server = postgresForFile();
const DAY = 86_400_000;
const NOW = 1_700_000_000_000;
let accounts = 0;

async function newAccount(owner: string): Promise<Lease> {
  const [lease] = await acquireLeases(server.pool, owner, [`batch-${++accounts}`], 600_000);
  return lease!;
}
const claim = (ledger: IdempotencyLedger, owner: string, lease: Lease, id: string, paramsHash = 'p') =>
  ledger.claim({ owner, lease, clientOrderId: id, paramsHash, now: NOW, expiresAt: NOW + DAY });

describe('idempotency ledger, group commit', () => {
  it('concurrent claims and outcomes over several accounts go out in fewer statements, each answered as alone', async () => {
    const ledger = new IdempotencyLedger(server.pool);
    const mine = [await newAccount('a'), await newAccount('a'), await newAccount('a')];
    const theirs = await newAccount('b');
    const calls = Array.from({ length: 24 }, (_, i) => ({ lease: i % 4 === 3 ? theirs : mine[i % 3]!, id: `o${i}` }));
    const answers = await Promise.all(calls.map((c) => claim(ledger, 'a', c.lease, c.id)));
    expect(answers).toEqual(calls.map((c) => ({ kind: c.lease === theirs ? 'fenced' : 'claimed' })));
    expect(ledger.batching.claims.batches).toBeGreaterThan(0);
    expect(ledger.batching.claims.batches + ledger.batching.claims.alone).toBeLessThan(calls.length);

    const owned = calls.filter((c) => c.lease !== theirs);
    const written = await Promise.all(owned.map((c) => ledger.recordOutcome('a', c.lease, c.id, 200, `{"id":"${c.id}"}`)));
    expect(written).toEqual(owned.map(() => 'written'));
    expect(ledger.batching.outcomes.batches).toBeGreaterThan(0);
    // Fenced in a batch too: the other node's account, and a settled claim again (noClaim).
    expect(await Promise.all([
      ledger.recordOutcome('a', theirs, 'x', 200, '{}'), ledger.recordOutcome('a', mine[0]!, 'o0', 200, '{}'), ledger.recordOutcome('a', mine[1]!, 'o1', 200, '{}'),
    ])).toEqual(['fenced', 'noClaim', 'noClaim']);
    for (const c of owned) {
      expect(await ledger.get(c.lease.accountId, c.id)).toMatchObject({ state: 'result', status: 200, result_json: `{"id":"${c.id}"}`, epoch: c.lease.epoch });
    }
    expect(await ledger.get(theirs.accountId, 'o3')).toBeUndefined();
  });

  it('a batch that meets a locked lease row runs its calls alone: they wait for the lock, as a single claim does, and are answered', async () => {
    // The first claim is held back on its way, so the next ones queue behind it and leave as one batch.
    let letLeadGo!: () => void;
    const gate = new Promise<void>((resolve) => (letLeadGo = resolve));
    const db = {
      query: async (q: { values?: unknown[] }) => {
        if (q.values?.[3] === 'lead') await gate;
        return server.pool.query(q as never);
      },
    } as unknown as Queryable;
    const ledger = new IdempotencyLedger(db);
    const [a, b] = [await newAccount('a'), await newAccount('a')];
    const first = claim(ledger, 'a', b, 'lead');
    const locker = await server.pool.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM account_leases WHERE account_id = $1 FOR UPDATE', [a.accountId]);
      const rest = Promise.all([claim(ledger, 'a', a, 'w1'), claim(ledger, 'a', a, 'w2'), claim(ledger, 'a', b, 'w3')]);
      let settled = false;
      void rest.then(() => (settled = true), () => (settled = true));
      letLeadGo();
      expect(await first).toEqual({ kind: 'claimed' });
      await until(async () => {
        const r = await server.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH fence%'`);
        return r.rows[0].n === 2;
      }, 'both claims on the locked account to wait for its lease row, alone');
      expect(settled).toBe(false);
      await locker.query('COMMIT');
      expect(await rest).toEqual([{ kind: 'claimed' }, { kind: 'claimed' }, { kind: 'claimed' }]);
      expect(ledger.batching.claims).toMatchObject({ batches: 0, retriedAlone: 1 });
    } finally {
      locker.release();
    }
  });

  it('a retry\'s claim answers from the record its statement met: one statement for a replay, in flight, other parameters, uncertain', async () => {
    let statements = 0;
    const db = { query: (q: never) => (statements++, server.pool.query(q)) } as unknown as Queryable;
    const ledger = new IdempotencyLedger(db);
    const lease = await newAccount('a');
    const count = async (f: () => Promise<unknown>) => {
      const before = statements;
      const out = await f();
      return [out, statements - before];
    };
    expect(await count(() => claim(ledger, 'a', lease, 'r1'))).toEqual([{ kind: 'claimed' }, 1]);
    expect(await count(() => claim(ledger, 'a', lease, 'r1'))).toEqual([{ kind: 'inFlight' }, 1]);
    expect(await count(() => claim(ledger, 'a', lease, 'r1', 'other'))).toEqual([{ kind: 'mismatch' }, 1]);
    await ledger.recordOutcome('a', lease, 'r1', 400, '{"error":"TRADE_REQUEST_ERROR"}');
    expect(await count(() => claim(ledger, 'a', lease, 'r1'))).toEqual([{ kind: 'replay', status: 400, resultJson: '{"error":"TRADE_REQUEST_ERROR"}' }, 1]);
    await claim(ledger, 'a', lease, 'r2');
    await ledger.markUncertain('a', lease, 'r2');
    expect(await count(() => claim(ledger, 'a', lease, 'r2'))).toEqual([{ kind: 'uncertain' }, 1]);
    // In a batch too: the replay and the new claim leave together behind a held first claim.
    const first = claim(ledger, 'a', lease, 'r3');
    const both = await count(() => Promise.all([claim(ledger, 'a', lease, 'r1'), claim(ledger, 'a', lease, 'r4')]));
    expect(await first).toEqual({ kind: 'claimed' });
    expect(both).toEqual([[{ kind: 'replay', status: 400, resultJson: '{"error":"TRADE_REQUEST_ERROR"}' }, { kind: 'claimed' }], 1]);
    expect(ledger.batching.claims.batches).toBe(1);
  });

  it('property: calls made at once (same ids, other parameters, another node\'s account) answer as if one at a time', async () => {
    const call = fc.record({ acct: fc.nat(2), id: fc.nat(3), params: fc.nat(1) });
    await fc.assert(fc.asyncProperty(fc.array(call, { minLength: 1, maxLength: 20 }), async (cs) => {
      const ledger = new IdempotencyLedger(server.pool);
      const leases = [await newAccount('a'), await newAccount('a'), await newAccount('b')];
      const answers = await Promise.all(cs.map((c) => claim(ledger, 'a', leases[c.acct]!, `o${c.id}`, `p${c.params}`)));
      // Per record: exactly one claim won; the others see it in flight (same parameters) or not theirs.
      const groups = new Map<string, Array<{ params: number; answer: ClaimOutcome }>>();
      cs.forEach((c, i) => {
        if (c.acct === 2) return expect(answers[i]).toEqual({ kind: 'fenced' });
        const k = `${c.acct}/${c.id}`;
        groups.set(k, [...(groups.get(k) ?? []), { params: c.params, answer: answers[i]! }]);
      });
      for (const [k, g] of groups) {
        const winners = g.filter((x) => x.answer.kind === 'claimed');
        expect(winners, k).toHaveLength(1);
        for (const x of g) if (x !== winners[0]) expect(x.answer, k).toEqual({ kind: x.params === winners[0]!.params ? 'inFlight' : 'mismatch' });
        const [acct, id] = k.split('/');
        expect(await ledger.get(leases[Number(acct)]!.accountId, `o${id}`)).toMatchObject({ params_hash: `p${winners[0]!.params}`, state: 'sent' });
      }
      expect(await server.pool.query('SELECT 1 FROM idempotency WHERE account_id = $1', [leases[2]!.accountId])).toMatchObject({ rowCount: 0 });
    }), { numRuns: 40 });
  }, 90_000);
});
