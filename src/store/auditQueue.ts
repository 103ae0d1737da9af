// Cluster mode's audit rows on their way to PostgreSQL, in the node's SQLite (migration 13): a row is
// here from before the action is answered until PostgreSQL has it (src/cluster/auditOutbox.ts), so
// a node killed meanwhile (SIGKILL, a crash, PostgreSQL away) writes it at its next start instead of
// losing it. Oldest first; `ref` names the row in PostgreSQL too.
import type { NewAuditRow } from './audit.js';
import type { Db } from './db.js';

export interface QueuedAudit { ref: string; row: NewAuditRow }

export class AuditQueueStore {
  private readonly q;
  constructor(db: Db) {
    this.q = {
      add: db.prepare<[string, string]>('INSERT INTO cluster_audit_queue (ref, row_json) VALUES (?, ?)'),
      first: db.prepare<[], { ref: string; row_json: string }>('SELECT ref, row_json FROM cluster_audit_queue ORDER BY seq LIMIT 1'),
      remove: db.prepare<[string]>('DELETE FROM cluster_audit_queue WHERE ref = ?'),
      count: db.prepare<[], { n: number }>('SELECT count(*) AS n FROM cluster_audit_queue'),
    };
  }

  add(ref: string, row: NewAuditRow): void {
    this.q.add.run(ref, JSON.stringify(row));
  }

  /** The oldest row waiting, if any. */
  first(): QueuedAudit | undefined {
    const r = this.q.first.get();
    return r && { ref: r.ref, row: JSON.parse(r.row_json) as NewAuditRow };
  }

  remove(ref: string): void {
    this.q.remove.run(ref);
  }

  get size(): number {
    return this.q.count.get()!.n;
  }
}
