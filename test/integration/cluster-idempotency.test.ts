// Fenced idempotency records in PostgreSQL (src/cluster/idempotencyLedger.ts) against a real server:
// the claim's answers as values, and a model-based property over interleavings of two owners with
// takeovers between them: a node fenced out after a takeover never writes again.
import fc from 'fast-check';
import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { classifyExisting, IdempotencyLedger, type ClaimOutcome, type WriteOutcome } from '../../src/cluster/idempotencyLedger.js';
import { acquireLeases, type Lease } from '../../src/cluster/leases.js';
import { postgresForFile } from '../helpers/postgres.js';
import { until } from '../helpers/until.js';

const server = postgresForFile();
let ledger: IdempotencyLedger;
let accounts = 0;

beforeAll(() => {
  ledger = new IdempotencyLedger(server.pool);
});

const DAY = 86_400_000;
const NOW = 1_700_000_000_000;

/** Expires the account's lease (as if its owner was paused past it) and gives it to `node`. */
async function takeOver(accountId: string, node: string): Promise<Lease> {
  await server.pool.query(`UPDATE account_leases SET expires_at = now() - interval '1 millisecond' WHERE account_id = $1`, [accountId]);
  const [lease] = await acquireLeases(server.pool, node, [accountId], 600_000);
  return lease!;
}
async function newAccount(owner: string): Promise<Lease> {
  const [lease] = await acquireLeases(server.pool, owner, [`acct-${++accounts}`], 600_000);
  return lease!;
}
const claim = (owner: string, lease: Lease, id: string, paramsHash = 'p', now = NOW, db: IdempotencyLedger = ledger) =>
  db.claim({ owner, lease, clientOrderId: id, paramsHash, now, expiresAt: now + DAY });

describe('idempotency ledger', () => {
  it('claim answers: new, in flight, replay, other params, uncertain; an expired record is claimed afresh', async () => {
    const lease = await newAccount('a');
    expect(await claim('a', lease, 'o1')).toEqual({ kind: 'claimed' });
    expect(await claim('a', lease, 'o1')).toEqual({ kind: 'inFlight' });
    expect(await claim('a', lease, 'o1', 'other')).toEqual({ kind: 'mismatch' });
    expect(await ledger.recordOutcome('a', lease, 'o1', 200, '{"retcode":10009}')).toBe('written');
    expect(await ledger.recordOutcome('a', lease, 'o1', 200, '{"again":true}')).toBe('noClaim');
    expect(await claim('a', lease, 'o1')).toEqual({ kind: 'replay', status: 200, resultJson: '{"retcode":10009}' });

    expect(await claim('a', lease, 'o2')).toEqual({ kind: 'claimed' });
    expect(await ledger.markUncertain('a', lease, 'o2')).toBe('written');
    expect(await claim('a', lease, 'o2')).toEqual({ kind: 'uncertain' });

    expect(await claim('a', lease, 'o3')).toEqual({ kind: 'claimed' });
    expect(await ledger.release('a', lease, 'o3')).toBe('written');
    expect(await ledger.get(lease.accountId, 'o3')).toBeUndefined();
    expect(await claim('a', lease, 'o3', 'new params')).toEqual({ kind: 'claimed' });

    // Past its expiry a record no longer binds the id: a new claim replaces it.
    expect(await claim('a', lease, 'o1', 'p2', NOW + DAY)).toEqual({ kind: 'claimed' });
    expect(await ledger.get(lease.accountId, 'o1')).toMatchObject({ params_hash: 'p2', state: 'sent', status: null, result_json: null });
    expect(await ledger.purgeExpired(NOW + DAY)).toBeGreaterThan(0);
  });

  it('a node without the lease is fenced out of every write; a new owner sees the old one\'s unanswered claim as uncertain', async () => {
    const a = await newAccount('a');
    expect(await claim('b', { ...a }, 'x')).toEqual({ kind: 'fenced' }); // b never held it
    expect(await claim('a', a, 'sent-by-a')).toEqual({ kind: 'claimed' });
    expect(await claim('a', a, 'answered-by-a')).toEqual({ kind: 'claimed' });
    expect(await ledger.recordOutcome('a', a, 'answered-by-a', 201, '"ok"')).toBe('written');
    const b = await takeOver(a.accountId, 'b');
    expect(b.epoch).toBe(a.epoch + 1);
    expect(await claim('b', b, 'sent-by-a')).toEqual({ kind: 'uncertain' });
    expect(await claim('b', b, 'answered-by-a')).toEqual({ kind: 'replay', status: 201, resultJson: '"ok"' });
    for (const write of [
      () => ledger.recordOutcome('a', a, 'sent-by-a', 200, '{}'),
      () => ledger.markUncertain('a', a, 'sent-by-a'),
      () => ledger.release('a', a, 'sent-by-a'),
    ]) expect(await write()).toBe('fenced');
    expect(await claim('a', a, 'new')).toEqual({ kind: 'fenced' });
    expect(await ledger.get(a.accountId, 'sent-by-a')).toMatchObject({ state: 'sent', epoch: a.epoch });
    expect(await ledger.get(a.accountId, 'new')).toBeUndefined();
  });

  it('a takeover waits for a write of the old owner that is in progress: that write lands before it, never after', async () => {
    const a = await newAccount('a');
    const client: pg.PoolClient = await server.pool.connect();
    let tookOver = false;
    try {
      await client.query('BEGIN');
      expect(await claim('a', a, 'slow', 'p', NOW, new IdempotencyLedger(client))).toEqual({ kind: 'claimed' });
      const takeover = takeOver(a.accountId, 'b').then((l) => {
        tookOver = true;
        return l;
      });
      await until(async () => {
        const r = await server.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE account_leases%'`);
        return r.rows[0].n === 1;
      }, 'the takeover to wait on the lease row the write holds');
      // Still waiting while the write's transaction is open.
      expect(tookOver).toBe(false);
      await client.query('COMMIT');
      const b = await takeover;
      // The write landed under the old epoch, before the takeover (which of the two answers reaches
      // this process first says nothing about the order they committed in: it raced under load).
      expect(await ledger.get(a.accountId, 'slow')).toMatchObject({ state: 'sent', epoch: a.epoch });
      expect(b.epoch).toBe(a.epoch + 1);
      expect(await claim('b', b, 'slow')).toEqual({ kind: 'uncertain' });
    } finally {
      client.release();
    }
  });

  it('classifies an existing record by parameters, state and epoch', () => {
    const row = { params_hash: 'p', state: 'sent' as const, status: null, result_json: null, epoch: 4 };
    expect(classifyExisting(row, 'p', 4)).toEqual({ kind: 'inFlight' });
    expect(classifyExisting(row, 'p', 5)).toEqual({ kind: 'uncertain' });
    expect(classifyExisting(row, 'q', 4)).toEqual({ kind: 'mismatch' });
    expect(classifyExisting({ ...row, state: 'uncertain' }, 'p', 4)).toEqual({ kind: 'uncertain' });
    expect(classifyExisting({ ...row, state: 'result', status: 422, result_json: '{"e":1}' }, 'p', 9)).toEqual({ kind: 'replay', status: 422, resultJson: '{"e":1}' });
  });

  it('property: two owners interleaving claims, outcomes and takeovers match a model in which only the current lease writes', async () => {
    type Node = 'A' | 'B';
    type Op =
      | { op: 'takeover'; to: Node }
      | { op: 'claim'; who: Node; id: number; params: number; tenure: number }
      | { op: 'outcome' | 'uncertain' | 'release'; who: Node; id: number; tenure: number };
    const who = fc.constantFrom<Node>('A', 'B');
    const id = fc.nat(3);
    // Which of the node's tenures the write comes from: 0 its latest lease, 1 the one before, ... (a
    // late write from a lease it held earlier, e.g. before it lost and re-acquired the account).
    const tenure = fc.nat(2);
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      fc.record({ op: fc.constant('takeover' as const), to: who }),
      fc.record({ op: fc.constant('claim' as const), who, id, params: fc.nat(1), tenure }),
      fc.record({ op: fc.constantFrom('outcome' as const, 'uncertain' as const, 'release' as const), who, id, tenure }),
    );
    interface Row { params: string; state: 'sent' | 'result' | 'uncertain'; epoch: number; status: number | null }
    await fc.assert(fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 25 }), async (ops) => {
      const first = await newAccount('A');
      const account = first.accountId;
      const lease = { holder: 'A' as Node, epoch: first.epoch };
      const tenures: Record<Node, number[]> = { A: [first.epoch], B: [] }; // the epochs each node acquired, oldest first
      const rows = new Map<number, Row>();
      for (const [step, o] of ops.entries()) {
        if (o.op === 'takeover') {
          const l = await takeOver(account, o.to);
          expect(l.epoch).toBe(lease.epoch + 1);
          Object.assign(lease, { holder: o.to, epoch: l.epoch });
          tenures[o.to].push(l.epoch);
          continue;
        }
        const held = tenures[o.who];
        const epoch = held[Math.max(0, held.length - 1 - o.tenure)];
        if (epoch === undefined) continue; // never held it: nothing to write with
        const mine: Lease = { accountId: account, epoch };
        const current = lease.holder === o.who && lease.epoch === epoch;
        const row = rows.get(o.id);
        const key = `o${o.id}`;
        if (o.op === 'claim') {
          const params = `p${o.params}`;
          let want: ClaimOutcome;
          if (!current) want = { kind: 'fenced' };
          else if (!row) {
            want = { kind: 'claimed' };
            rows.set(o.id, { params, state: 'sent', epoch, status: null });
          } else want = classifyExisting({ params_hash: row.params, state: row.state, status: row.status, result_json: row.status === null ? null : `${row.status}`, epoch: row.epoch }, params, epoch);
          expect(await claim(o.who, mine, key, params), `step ${step}`).toEqual(want);
        } else {
          const open = current && row?.state === 'sent' && row.epoch === epoch;
          const want: WriteOutcome = !current ? 'fenced' : open ? 'written' : 'noClaim';
          const status = 200 + step;
          const got = o.op === 'outcome' ? await ledger.recordOutcome(o.who, mine, key, status, `${status}`)
            : o.op === 'uncertain' ? await ledger.markUncertain(o.who, mine, key)
            : await ledger.release(o.who, mine, key);
          expect(got, `step ${step}`).toBe(want);
          if (open && o.op === 'release') rows.delete(o.id);
          else if (open) Object.assign(row!, o.op === 'outcome' ? { state: 'result', status } : { state: 'uncertain' });
        }
      }
      const stored = await server.pool.query<{ client_order_id: string; params_hash: string; state: string; epoch: number; status: number | null }>(
        'SELECT client_order_id, params_hash, state, epoch, status FROM idempotency WHERE account_id = $1 ORDER BY client_order_id', [account]);
      expect(stored.rows).toEqual([...rows].sort(([x], [y]) => x - y)
        .map(([i, r]) => ({ client_order_id: `o${i}`, params_hash: r.params, state: r.state, epoch: r.epoch, status: r.status })));
    }), { numRuns: 100 });
  }, 60_000);
});
