// The audit log of management actions: who (the management key id), what, on which target, when.
// Rows are only ever added; nothing deletes them (a removed seat keeps its history).
import type { Db } from './db.js';

export interface AuditRow {
  id: number;
  customer_id: string;
  at: number;
  actor_key_id: string;
  action: string;
  target: string | null;
  detail_json: string | null;
}

export type NewAuditRow = Omit<AuditRow, 'id'>;

/** An action's audit row, made from the change's outcome inside the change's own transaction, so
 *  the two commit together or not at all (TenancyWrites). undefined: no row (the action did not happen). */
export type AuditOf<T> = (out: T) => NewAuditRow | undefined;

export class AuditStore {
  private readonly q;
  constructor(db: Db) {
    this.q = {
      insert: db.prepare(`INSERT INTO audit_log (customer_id, at, actor_key_id, action, target, detail_json)
        VALUES (@customer_id, @at, @actor_key_id, @action, @target, @detail_json)`),
      // Newest first; `before` pages back by id.
      list: db.prepare<[string, number, number], AuditRow>('SELECT * FROM audit_log WHERE customer_id = ? AND id < ? ORDER BY id DESC LIMIT ?'),
    };
  }

  add(row: NewAuditRow): number {
    return Number(this.q.insert.run(row).lastInsertRowid);
  }

  list(customerId: string, opts: { limit: number; before?: number | undefined }): AuditRow[] {
    return this.q.list.all(customerId, opts.before ?? Number.MAX_SAFE_INTEGER, opts.limit);
  }
}
