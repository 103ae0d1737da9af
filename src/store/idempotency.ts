// Idempotency records of trade requests (SPEC §3, §8), written only by the shard that owns the
// account. The 'sent' row is committed BEFORE the request goes to the broker: after a crash a
// 'sent' row without a result means "may have executed" and is never sent again.
import type { Db } from './db.js';

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
  constructor(db: Db) {
    this.tx = db.transaction((f: () => void) => f());
    this.q = {
      insertSent: db.prepare(`INSERT OR IGNORE INTO idempotency (account_id, client_order_id, params_hash, phase, created_at, expires_at)
        VALUES (?, ?, ?, 'sent', ?, ?)`),
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

  /** Durably claims the id. False when a record already exists (the caller must read it). */
  insertSent(accountId: string, id: string, paramsHash: string, now: number, expiresAt: number): boolean {
    return this.q.insertSent.run(accountId, id, paramsHash, now, expiresAt).changes === 1;
  }
  get(accountId: string, id: string): IdemRow | undefined {
    return this.q.get.get(accountId, id);
  }
  setResult(accountId: string, id: string, status: number, resultJson: string): void {
    this.q.setResult.run(status, resultJson, accountId, id);
  }
  setUncertain(accountId: string, id: string): void {
    this.q.setUncertain.run(accountId, id);
  }
  /** Only for a request that certainly never reached the broker. */
  remove(accountId: string, id: string): void {
    this.q.remove.run(accountId, id);
  }
  purgeExpired(now: number): number {
    return this.q.purge.run(now).changes;
  }
  /** Records whose outcome was never written (the process stopped while their order was out). */
  unsettled(now: number): IdemRow[] {
    return this.q.unsettled.all(now);
  }
}
