// Idempotency records in PostgreSQL, so the contract holds across nodes (CLUSTER-PLAN.md): the
// owner claims (account, clientOrderId) durably before the order reaches the broker and writes the
// outcome after. Every write is fenced by the account's lease epoch (leases.ts fenceSql): an owner
// that was paused or cut off past its lease cannot claim, record or clear anything once another
// node took the account. Results are values, not exceptions; a failed statement (PostgreSQL down)
// rejects and the caller answers 503 without calling the broker.
import { GroupCommit } from './groupCommit.js';
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
// A claim that did not insert also answers the record it met, as the statement's snapshot has it, so
// a retry (replay, in flight, other parameters) costs one round trip, not a second SELECT. A record
// committed while the statement ran (the insert waited for it) is not in that snapshot: those
// columns come back null and the claim reads the record with a SELECT, as before.
const EXISTING = 'e.params_hash, e.state, e.status, e.result_json, e.epoch, e.expires_at';
const EXISTING_JOIN = 'LEFT JOIN idempotency e ON e.account_id = r.account_id AND e.client_order_id = r.client_order_id';
const CLAIM_SQL = `WITH fence AS (${FENCE}),
  ins AS (
    INSERT INTO idempotency (account_id, client_order_id, params_hash, state, epoch, created_at, expires_at)
      SELECT $1::text, $4::text, $5::text, 'sent', $3::bigint, $6::bigint, $7::bigint FROM fence
    ON CONFLICT (account_id, client_order_id) DO UPDATE SET params_hash = excluded.params_hash, state = 'sent',
      status = NULL, result_json = NULL, epoch = excluded.epoch, created_at = excluded.created_at, expires_at = excluded.expires_at
      WHERE idempotency.expires_at <= excluded.created_at
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned, EXISTS (SELECT 1 FROM ins) AS claimed, ${EXISTING}
  FROM (SELECT $1::text AS account_id, $4::text AS client_order_id) r ${EXISTING_JOIN}`;
// Only the claim's own tenure may settle it: an open claim with the same epoch on the record, and
// the lease still held at that epoch.
const settle = (write: string) => `WITH fence AS (${FENCE}),
  w AS (${write} WHERE account_id = $1 AND client_order_id = $4 AND state = 'sent' AND epoch = $3 AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned, EXISTS (SELECT 1 FROM w) AS written`;
const WRITE_SQL = {
  outcome: settle(`UPDATE idempotency SET state = 'result', status = $5::int, result_json = $6::text`),
  uncertain: settle(`UPDATE idempotency SET state = 'uncertain'`),
  release: settle('DELETE FROM idempotency'),
  // A record an earlier claim left open or uncertain (not this lease's open claim, which its own
  // send settles), taken over by the owner now at its epoch with the result the broker reported.
  adopt: `WITH fence AS (${FENCE}),
  w AS (UPDATE idempotency SET state = 'result', status = $5::int, result_json = $6::text, epoch = $3::bigint
    WHERE account_id = $1 AND client_order_id = $4 AND state <> 'result' AND NOT (state = 'sent' AND epoch = $3::bigint) AND EXISTS (SELECT 1 FROM fence) RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned, EXISTS (SELECT 1 FROM w) AS written`,
};

// The same statements for several orders at once (GroupCommit): each row of `req` is one call's
// parameters and gets the answer the one-row statement would give it. The fence locks its lease rows
// in account order and NOWAIT: a batch never waits on a lease row (a renewal, a takeover holds it),
// so it can never close a cycle of waits with them; such a batch fails and each call runs alone,
// waiting as before. Its keys are distinct and none is open on this node (see `unsettled`).
const BATCH_FENCE = `fence AS (SELECT l.account_id, l.owner, l.epoch FROM account_leases l
    WHERE (l.account_id, l.owner, l.epoch) IN (SELECT account_id, owner, epoch FROM req) AND l.expires_at > now()
    ORDER BY l.account_id FOR SHARE NOWAIT)`;
const OWNED = 'EXISTS (SELECT 1 FROM fence f WHERE f.account_id = r.account_id AND f.owner = r.owner AND f.epoch = r.epoch) AS owned';
const CLAIM_MANY_SQL = `WITH req AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])
    WITH ORDINALITY AS r(account_id, owner, epoch, client_order_id, params_hash, created_at, expires_at, ord)),
  ${BATCH_FENCE},
  ins AS (
    INSERT INTO idempotency (account_id, client_order_id, params_hash, state, epoch, created_at, expires_at)
      SELECT r.account_id, r.client_order_id, r.params_hash, 'sent', r.epoch, r.created_at, r.expires_at FROM req r JOIN fence USING (account_id, owner, epoch)
    ON CONFLICT (account_id, client_order_id) DO UPDATE SET params_hash = excluded.params_hash, state = 'sent',
      status = NULL, result_json = NULL, epoch = excluded.epoch, created_at = excluded.created_at, expires_at = excluded.expires_at
      WHERE idempotency.expires_at <= excluded.created_at
    RETURNING account_id, client_order_id)
  SELECT ${OWNED}, EXISTS (SELECT 1 FROM ins i WHERE i.account_id = r.account_id AND i.client_order_id = r.client_order_id) AS claimed, ${EXISTING}
  FROM req r ${EXISTING_JOIN} ORDER BY r.ord`;
const OUTCOME_MANY_SQL = `WITH req AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::int[], $6::text[])
    WITH ORDINALITY AS r(account_id, owner, epoch, client_order_id, status, result_json, ord)),
  ${BATCH_FENCE},
  w AS (UPDATE idempotency i SET state = 'result', status = q.status, result_json = q.result_json
    FROM req q JOIN fence USING (account_id, owner, epoch)
    WHERE i.account_id = q.account_id AND i.client_order_id = q.client_order_id AND i.state = 'sent' AND i.epoch = q.epoch
    RETURNING i.account_id, i.client_order_id)
  SELECT ${OWNED}, EXISTS (SELECT 1 FROM w WHERE w.account_id = r.account_id AND w.client_order_id = r.client_order_id) AS written
  FROM req r ORDER BY r.ord`;

/** What a claim statement answers: whether the lease held and the record was inserted; if not, the
 *  record it met (all null when none, or none in its snapshot). */
type MetRecord = Pick<LedgerRow, 'params_hash' | 'state' | 'status' | 'result_json' | 'epoch' | 'expires_at'>;
type ClaimRow = { owned: boolean; claimed: boolean } & { [K in keyof MetRecord]: MetRecord[K] | null };
interface ClaimCall { owner: string; lease: Lease; clientOrderId: string; paramsHash: string; now: number; expiresAt: number }
interface OutcomeCall { owner: string; lease: Lease; clientOrderId: string; status: number; resultJson: string }

/** A batch that must not wait or could not: a lease row locked (NOWAIT), or a cycle PostgreSQL broke;
 *  or one not sent because two of its calls name the same record (each runs alone, in turn). */
const LOCK_NOT_AVAILABLE = '55P03';
const DEADLOCK = '40P01';
class SameRecordTwice extends Error {}
const retryAlone = (err: unknown) => {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof SameRecordTwice || code === LOCK_NOT_AVAILABLE || code === DEADLOCK;
};
const recordKey = (accountId: string, clientOrderId: string) => `${accountId}\u0000${clientOrderId}`;
function distinct(cs: Array<{ lease: Lease; clientOrderId: string }>): void {
  if (new Set(cs.map((c) => recordKey(c.lease.accountId, c.clientOrderId))).size !== cs.length) throw new SameRecordTwice();
}

export class IdempotencyLedger {
  /**
   * Records (account, id) with a claim of this node under way, and those it claimed and has not
   * settled. A claim for one of them (a retry while its order is out) runs alone, never in a batch:
   * a batch then only inserts ids no other statement of this node holds, so it waits on no row that
   * another batch of this node holds (and should it ever, PostgreSQL breaks the cycle and the
   * batch's calls run alone).
   */
  private readonly claiming = new Map<string, number>();
  private readonly unsettled = new Set<string>();
  private readonly claims: GroupCommit<ClaimCall, ClaimRow>;
  private readonly outcomes: GroupCommit<OutcomeCall, WriteOutcome>;

  constructor(private readonly db: Queryable) {
    this.claims = new GroupCommit({
      one: (c) => this.claimOne(c),
      many: async (cs) => (distinct(cs), await this.db.query<ClaimRow>({
        name: 'tagw_idem_claim_many', text: CLAIM_MANY_SQL,
        values: [cs.map((c) => c.lease.accountId), cs.map((c) => c.owner), cs.map((c) => c.lease.epoch), cs.map((c) => c.clientOrderId),
          cs.map((c) => c.paramsHash), cs.map((c) => c.now), cs.map((c) => c.expiresAt)],
      })).rows,
      retryAlone,
    });
    this.outcomes = new GroupCommit({
      one: (c) => this.fencedWrite(c.owner, c.lease, c.clientOrderId, 'outcome', [c.status, c.resultJson]),
      many: async (cs) => (distinct(cs), await this.db.query<{ owned: boolean; written: boolean }>({
        name: 'tagw_idem_outcome_many', text: OUTCOME_MANY_SQL,
        values: [cs.map((c) => c.lease.accountId), cs.map((c) => c.owner), cs.map((c) => c.lease.epoch), cs.map((c) => c.clientOrderId),
          cs.map((c) => c.status), cs.map((c) => c.resultJson)],
      })).rows.map(({ owned, written }) => (!owned ? 'fenced' : written ? 'written' : 'noClaim')),
      retryAlone,
    });
  }

  /** Claims of this node not settled yet (orders out at the broker; tests). */
  get openClaims(): number {
    return this.unsettled.size;
  }

  /** Statements that carried several calls, and how many (benches, tests). */
  get batching(): { claims: GroupCommit<ClaimCall, unknown>['stats']; outcomes: GroupCommit<OutcomeCall, unknown>['stats'] } {
    return { claims: this.claims.stats, outcomes: this.outcomes.stats };
  }

  private claimOne(r: ClaimCall): Promise<ClaimRow> {
    const { lease } = r;
    return this.db.query<ClaimRow>({
      name: 'tagw_idem_claim', text: CLAIM_SQL,
      values: [lease.accountId, r.owner, lease.epoch, r.clientOrderId, r.paramsHash, r.now, r.expiresAt],
    }).then((w) => w.rows[0]!);
  }

  /**
   * Claims the id for an order about to be sent. One fenced statement inserts the 'sent' record (or
   * overwrites an expired one); when the id is taken the same statement answers the record it met, which is classified. Never
   * 'claimed' unless this node held the lease at that epoch when the record was written.
   */
  async claim(r: ClaimRequest): Promise<ClaimOutcome> {
    const { lease } = r;
    const key = recordKey(lease.accountId, r.clientOrderId);
    const alone = this.claiming.has(key) || this.unsettled.has(key);
    this.claiming.set(key, (this.claiming.get(key) ?? 0) + 1);
    try {
      // A record read as absent or expired right after the insert found it present was purged or
      // rewritten meanwhile: claim again (bounded; each pass is one statement, or two when the
      // record met was committed while the claim ran).
      for (let attempt = 0; attempt < 3; attempt++) {
        const w = await (alone || attempt > 0 ? this.claimOne(r) : this.claims.submit(r));
        if (!w.owned) return { kind: 'fenced' };
        if (w.claimed) {
          // Open until it is settled (recordOutcome, markUncertain, release).
          this.unsettled.add(key);
          return { kind: 'claimed' };
        }
        const row: MetRecord | undefined = w.state !== null ? w as MetRecord : await this.get(lease.accountId, r.clientOrderId);
        if (row && row.expires_at > r.now) return classifyExisting(row, r.paramsHash, lease.epoch);
      }
      throw new Error(`idempotency record ${lease.accountId}/${r.clientOrderId} kept changing under its claim`);
    } finally {
      const n = this.claiming.get(key)! - 1;
      if (n > 0) this.claiming.set(key, n);
      else this.claiming.delete(key);
    }
  }

  /** The broker's answer to a claimed order, recorded if this node still holds the lease it claimed under. */
  recordOutcome(owner: string, lease: Lease, clientOrderId: string, status: number, resultJson: string): Promise<WriteOutcome> {
    return this.settled(lease, clientOrderId, this.outcomes.submit({ owner, lease, clientOrderId, status, resultJson }));
  }

  /** The send's outcome is unknown (the connection dropped mid-call): a retry must answer 409. */
  markUncertain(owner: string, lease: Lease, clientOrderId: string): Promise<WriteOutcome> {
    return this.settled(lease, clientOrderId, this.fencedWrite(owner, lease, clientOrderId, 'uncertain', []));
  }

  /** The result the broker reported for an order whose record an earlier owner left open (it died
   *  mid-call) or uncertain, recorded by `owner` if it holds the lease: later retries replay it. */
  adopt(owner: string, lease: Lease, clientOrderId: string, status: number, resultJson: string): Promise<WriteOutcome> {
    return this.fencedWrite(owner, lease, clientOrderId, 'adopt', [status, resultJson]);
  }

  /** Clears a claim whose order certainly never reached the broker (refused before sending). */
  release(owner: string, lease: Lease, clientOrderId: string): Promise<WriteOutcome> {
    return this.settled(lease, clientOrderId, this.fencedWrite(owner, lease, clientOrderId, 'release', []));
  }

  /** The claim of this node is no longer open once its settling write answered (or failed). */
  private settled(lease: Lease, clientOrderId: string, write: Promise<WriteOutcome>): Promise<WriteOutcome> {
    return write.finally(() => this.unsettled.delete(recordKey(lease.accountId, clientOrderId)));
  }

  /** Whether `owner` holds the lease at its epoch now (unexpired), by the check every claim makes:
   *  what an owner asks before a change of the account's state that is no order (fencedShards.ts). */
  async holds(owner: string, lease: Lease): Promise<boolean> {
    const r = await this.db.query<{ held: boolean }>(`SELECT EXISTS (${FENCE}) AS held`, [lease.accountId, owner, lease.epoch]);
    return r.rows[0]?.held === true;
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
