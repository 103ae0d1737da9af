// Idempotency records of trade requests (SPEC §3, §8), written only by the shard that owns the
// account. The 'sent' row is committed BEFORE the request goes to the broker: after a crash a
// 'sent' row without a result means "may have executed" and is never sent again.
import type { Db } from './db.js';
import { systemClock, type Clock } from '../util/clock.js';
import { ClaimedIds } from './claimedIds.js';

export type IdemPhase = 'sent' | 'result' | 'uncertain';

export interface IdemRow {
  account_id: string;
  client_order_id: string;
  params_hash: string;
  phase: IdemPhase;
  status: number | null;
  result_json: string | null;
  created_at: number;
  expires_at: number;
}

const COLUMNS = 'account_id, client_order_id, params_hash, phase, status, result_json, created_at, expires_at';

export class IdempotencyStore {
  private readonly q;
  private readonly tx: (f: () => void) => void;
  /** Inside `writeOnce`: the records claimed there, not written yet. */
  private held: IdemRow[] | null = null;
  private readonly heldRows: IdemRow[] = [];
  /** Ids that may have a record (claimedIds.ts), complete for the accounts in `known`. */
  private readonly claimed: ClaimedIds;
  /** Accounts whose records from before this store (an earlier process) are in `claimed`. */
  private readonly known = new Set<string>();
  /** Only the shard that owns an account writes its records: all of them go through this store. */
  constructor(db: Db, clock: Clock = systemClock) {
    this.claimed = new ClaimedIds(clock);
    this.tx = db.transaction((f: () => void) => f());
    this.q = {
      insertSent: db.prepare(`INSERT OR IGNORE INTO idempotency (account_id, client_order_id, params_hash, phase, created_at, expires_at)
        VALUES (?, ?, ?, 'sent', ?, ?)`),
      insert: db.prepare(`INSERT INTO idempotency (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
      exists: db.prepare<[string, string], unknown>('SELECT 1 FROM idempotency WHERE account_id = ? AND client_order_id = ?').pluck(),
      ofAccount: db.prepare<[string], { client_order_id: string; expires_at: number }>('SELECT client_order_id, expires_at FROM idempotency WHERE account_id = ?'),
      get: db.prepare<[string, string], IdemRow>(`SELECT ${COLUMNS} FROM idempotency WHERE account_id = ? AND client_order_id = ?`),
      setResult: db.prepare(`UPDATE idempotency SET phase = 'result', status = ?, result_json = ? WHERE account_id = ? AND client_order_id = ?`),
      setUncertain: db.prepare(`UPDATE idempotency SET phase = 'uncertain' WHERE account_id = ? AND client_order_id = ? AND phase = 'sent'`),
      remove: db.prepare('DELETE FROM idempotency WHERE account_id = ? AND client_order_id = ?'),
      purge: db.prepare('DELETE FROM idempotency WHERE expires_at <= ?'),
      unsettled: db.prepare<[number], IdemRow>(`SELECT ${COLUMNS} FROM idempotency WHERE phase = 'sent' AND expires_at > ?`),
    };
  }

  /** Runs `f`'s writes in one transaction: one commit for a whole turn's outcomes. */
  batch(f: () => void): void {
    this.tx(f);
  }

  /**
   * Runs `f`, which claims records and may settle them, inside a transaction the caller holds, and
   * writes each record it claimed once, in the phase it has when `f` returns: a claim settled in
   * the same transaction (the embedded broker's booking) is one insert of its final row instead of
   * an insert of 'sent' and an update of it. A claim that collides with a record is found here,
   * after `f`, and throws (the caller checked before claiming: it means the transaction must not commit).
   */
  writeOnce(f: () => void): void;
  /** `f(arg)`: a function made once, not a closure per claim. */
  writeOnce<A>(f: (arg: A) => void, arg: A): void;
  writeOnce<A>(f: (arg?: A) => void, arg?: A): void {
    // One list for every call (emptied after), not a new one an order: writeOnce is not re-entered.
    const held = (this.held = this.heldRows);
    try {
      try {
        f(arg);
      } finally {
        this.held = null;
      }
      for (const r of held) {
        if (this.q.insert.run(r.account_id, r.client_order_id, r.params_hash, r.phase, r.status, r.result_json, r.created_at, r.expires_at).changes !== 1) {
          throw new Error(`idempotency record ${r.client_order_id} already exists`);
        }
      }
    } finally {
      held.length = 0;
    }
  }

  private heldRow(accountId: string, id: string): IdemRow | undefined {
    const held = this.held;
    if (held) for (const r of held) if (r.client_order_id === id && r.account_id === accountId) return r;
    return undefined;
  }

  /** Durably claims the id. False when a record already exists (the caller must read it). */
  insertSent(accountId: string, id: string, paramsHash: string, now: number, expiresAt: number): boolean {
    this.claimed.add(accountId, id, expiresAt);
    if (this.held) {
      this.held.push({ account_id: accountId, client_order_id: id, params_hash: paramsHash, phase: 'sent', status: null, result_json: null, created_at: now, expires_at: expiresAt });
      return true;
    }
    return this.q.insertSent.run(accountId, id, paramsHash, now, expiresAt).changes === 1;
  }
  /** Whether a record holds the id: read from the unique index, unless no record can (ClaimedIds). */
  exists(accountId: string, id: string): boolean {
    if (!this.known.has(accountId)) {
      // Once per account: the records an earlier process wrote.
      for (const r of this.q.ofAccount.iterate(accountId)) this.claimed.add(accountId, r.client_order_id, r.expires_at);
      this.known.add(accountId);
    }
    if (!this.claimed.mayHold(accountId, id)) return false;
    return this.q.exists.get(accountId, id) !== undefined;
  }
  get(accountId: string, id: string): IdemRow | undefined {
    return this.q.get.get(accountId, id);
  }
  setResult(accountId: string, id: string, status: number, resultJson: string): void {
    const h = this.heldRow(accountId, id);
    if (h) Object.assign(h, { phase: 'result', status, result_json: resultJson });
    else this.q.setResult.run(status, resultJson, accountId, id);
  }
  setUncertain(accountId: string, id: string): void {
    const h = this.heldRow(accountId, id);
    if (h) {
      if (h.phase === 'sent') h.phase = 'uncertain';
    } else this.q.setUncertain.run(accountId, id);
  }
  /** Only for a request that certainly never reached the broker. */
  remove(accountId: string, id: string): void {
    const h = this.heldRow(accountId, id);
    if (h) this.held!.splice(this.held!.indexOf(h), 1);
    else this.q.remove.run(accountId, id);
  }
  purgeExpired(now: number): number {
    return this.q.purge.run(now).changes;
  }
  /** Records whose outcome was never written (the process stopped while their order was out). */
  unsettled(now: number): IdemRow[] {
    return this.q.unsettled.all(now);
  }
}
