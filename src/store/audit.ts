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
  /** Made with the request (unique): a row written again under it is not written twice. */
  ref: string | null;
}

/** `ref` optional: a row made once needs none. */
export type NewAuditRow = Omit<AuditRow, 'id' | 'ref'> & { ref?: string | null };

/** An action's audit row, made from the change's outcome inside the change's own transaction, so
 *  the two commit together or not at all (TenancyWrites). undefined: no row (the action did not happen). */
export type AuditOf<T> = (out: T) => NewAuditRow | undefined;

export class AuditStore {
  private readonly q;
  constructor(db: Db) {
    this.q = {
      // A row whose reference is there already was written by an earlier run of the same call.
      insert: db.prepare(`INSERT INTO audit_log (customer_id, at, actor_key_id, action, target, detail_json, ref)
        VALUES (@customer_id, @at, @actor_key_id, @action, @target, @detail_json, @ref) ON CONFLICT (ref) DO NOTHING`),
      // Newest first; `before` pages back by id.
      list: db.prepare<[string, number, number], AuditRow>('SELECT * FROM audit_log WHERE customer_id = ? AND id < ? ORDER BY id DESC LIMIT ?'),
    };
  }

  /** The row's id (0: its reference was written before, nothing added). */
  add(row: NewAuditRow): number {
    const r = this.q.insert.run({ ...row, ref: row.ref ?? null });
    return r.changes === 0 ? 0 : Number(r.lastInsertRowid);
  }

  list(customerId: string, opts: { limit: number; before?: number | undefined }): AuditRow[] {
    return this.q.list.all(customerId, opts.before ?? Number.MAX_SAFE_INTEGER, opts.limit);
  }
}
