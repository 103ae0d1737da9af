// Idempotency records in PostgreSQL, so the contract holds across nodes (CLUSTER-PLAN.md): the
// owner claims (account, clientOrderId) durably before the order reaches the broker and writes the
// outcome after. Every write is fenced by the account's lease epoch (leases.ts fenceSql): an owner
// that was paused or cut off past its lease cannot claim, record or clear anything once another
// node took the account. Results are values, not exceptions; a failed statement (PostgreSQL down)
// rejects and the caller answers 503 without calling the broker.
import { fenceSql, type Lease } from './leases.js';
import type { Queryable } from './pgPool.js';

export interface LedgerRow {
  account_id: string;
  client_order_id: string;
  params_hash: string;
  state: 'sent' | 'result' | 'uncertain';
  status: number | null;
  result_json: string | null;
  epoch: number;
  created_at: number;
  expires_at: number;
}

export type ClaimOutcome =
  /** New (or the old record expired): go ahead, then record the outcome. */
  | { kind: 'claimed' }
  /** Same parameters, answered before: replay that answer. */
  | { kind: 'replay'; status: number; resultJson: string }
  /** Same parameters, sent by this owner in this lease and not answered yet: wait for it. */
  | { kind: 'inFlight' }
  /** Same parameters, sent by an earlier owner (or marked so) with no outcome: it may have executed
   *  (409 IDEMPOTENCY_UNCERTAIN, never sent again). */
  | { kind: 'uncertain' }
  /** The id was used with other parameters (422, as on one node). */
  | { kind: 'mismatch' }
  /** This node does not hold the account's lease at that epoch: it must not act (not the owner). */
  | { kind: 'fenced' };

/** A write after the broker answered: recorded; refused because the lease moved on; or no open
 *  claim of this lease to settle (already settled, or never claimed at this epoch). */
export type WriteOutcome = 'written' | 'fenced' | 'noClaim';

/** What an existing record means for a claim with these parameters by the owner at `epoch`. */
export function classifyExisting(row: Pick<LedgerRow, 'params_hash' | 'state' | 'status' | 'result_json' | 'epoch'>, paramsHash: string, epoch: number): ClaimOutcome {
  if (row.params_hash !== paramsHash) return { kind: 'mismatch' };
  if (row.state === 'result') return { kind: 'replay', status: row.status ?? 200, resultJson: row.result_json ?? 'null' };
  if (row.state === 'sent' && row.epoch === epoch) return { kind: 'inFlight' };
  return { kind: 'uncertain' };
}

export interface ClaimRequest {
  /** The lease this node holds: its node id and epoch (LeaseKeeper.leaseOf). */
  owner: string;
  lease: Lease;
  clientOrderId: string;
  paramsHash: string;
  /** ms, this node's clock (as SQLite's records): when the record was made and when it may go. */
  now: number;
  expiresAt: number;
}

// Named statements (prepared once per connection): planning these CTEs on every call cost more
// than running them (bench cluster-pg).
const FENCE = fenceSql({ account: 1, owner: 2, epoch: 3 });
const CLAIM_SQL = `WITH fence AS (${FENCE}),
  ins AS (
    INSERT INTO idempotency (account_id, client_order_id, params_hash, state, epoch, created_at, expires_at)
      SELECT $1::text, $4::text, $5::text, 'sent', $3::bigint, $6::bigint, $7::bigint FROM fence
    ON CONFLICT (account_id, client_order_id) DO UPDATE SET params_hash = excluded.params_hash, state = 'sent',
      status = NULL, result_json = NULL, epoch = excluded.epoch, created_at = excluded.created_at, expires_at = excluded.expires_at
      WHERE idempotency.expires_at <= excluded.created_at
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned, EXISTS (SELECT 1 FROM ins) AS claimed`;
// Only the claim's own tenure may settle it: an open claim with the same epoch on the record, and
// the lease still held at that epoch.
const settle = (write: string) => `WITH fence AS (${FENCE}),
  w AS (${write} WHERE account_id = $1 AND client_order_id = $4 AND state = 'sent' AND epoch = $3 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned, EXISTS (SELECT 1 FROM w) AS written`;
const WRITE_SQL = {
  outcome: settle(`UPDATE idempotency SET state = 'result', status = $5::int, result_json = $6::text`),
  uncertain: settle(`UPDATE idempotency SET state = 'uncertain'`),
  release: settle('DELETE FROM idempotency'),
};

export class IdempotencyLedger {
  constructor(private readonly db: Queryable) {}

  /**
   * Claims the id for an order about to be sent. One fenced statement inserts the 'sent' record (or
   * overwrites an expired one); when the id is taken the record is read and classified. Never
   * 'claimed' unless this node held the lease at that epoch when the record was written.
   */
  async claim(r: ClaimRequest): Promise<ClaimOutcome> {
    const { lease } = r;
    // A record read as absent or expired right after the insert found it present was purged or
    // rewritten meanwhile: claim again (bounded; each pass is one or two statements).
    for (let attempt = 0; attempt < 3; attempt++) {
      const w = await this.db.query<{ owned: boolean; claimed: boolean }>({
        name: 'tagw_idem_claim', text: CLAIM_SQL,
        values: [lease.accountId, r.owner, lease.epoch, r.clientOrderId, r.paramsHash, r.now, r.expiresAt],
      });
      const { owned, claimed } = w.rows[0]!;
      if (!owned) return { kind: 'fenced' };
      if (claimed) return { kind: 'claimed' };
      const row = await this.get(lease.accountId, r.clientOrderId);
      if (row && row.expires_at > r.now) return classifyExisting(row, r.paramsHash, lease.epoch);
    }
    throw new Error(`idempotency record ${lease.accountId}/${r.clientOrderId} kept changing under its claim`);
  }

  /** The broker's answer to a claimed order, recorded if this node still holds the lease it claimed under. */
  recordOutcome(owner: string, lease: Lease, clientOrderId: string, status: number, resultJson: string): Promise<WriteOutcome> {
    return this.fencedWrite(owner, lease, clientOrderId, 'outcome', [status, resultJson]);
  }

  /** The send's outcome is unknown (the connection dropped mid-call): a retry must answer 409. */
  markUncertain(owner: string, lease: Lease, clientOrderId: string): Promise<WriteOutcome> {
    return this.fencedWrite(owner, lease, clientOrderId, 'uncertain', []);
  }

  /** Clears a claim whose order certainly never reached the broker (refused before sending). */
  release(owner: string, lease: Lease, clientOrderId: string): Promise<WriteOutcome> {
    return this.fencedWrite(owner, lease, clientOrderId, 'release', []);
  }

  async get(accountId: string, clientOrderId: string): Promise<LedgerRow | undefined> {
    const r = await this.db.query<LedgerRow>('SELECT * FROM idempotency WHERE account_id = $1 AND client_order_id = $2', [accountId, clientOrderId]);
    return r.rows[0];
  }

  /** Deletes records past their expiry (ms on the writers' clocks); any node may, unfenced. */
  async purgeExpired(now: number): Promise<number> {
    const r = await this.db.query('DELETE FROM idempotency WHERE expires_at <= $1', [now]);
    return r.rowCount ?? 0;
  }

  // Only the claim's own tenure may settle it: an open claim with the same epoch on the record, and
  // the lease still held at that epoch.
  private async fencedWrite(owner: string, lease: Lease, clientOrderId: string, write: keyof typeof WRITE_SQL, params: unknown[]): Promise<WriteOutcome> {
    const r = await this.db.query<{ owned: boolean; written: boolean }>({
      name: `tagw_idem_${write}`, text: WRITE_SQL[write], values: [lease.accountId, owner, lease.epoch, clientOrderId, ...params],
    });
    const { owned, written } = r.rows[0]!;
    return !owned ? 'fenced' : written ? 'written' : 'noClaim';
  }
}
