// Audit rows in cluster mode, on their way to PostgreSQL (the audit log is a record of value). A row
// is written into this node's SQLite first (AuditQueueStore, synchronously, before the action is
// answered), then to PostgreSQL, and leaves the queue once PostgreSQL has it. So nothing is lost when
// the node dies (SIGKILL, a crash) before or while writing it, or while PostgreSQL is unreachable:
// what is still queued is written at the node's next start (the first `retry`). Each row carries a
// reference made here, unique in PostgreSQL: a write repeated after a crash between PostgreSQL's
// commit and the queue's delete adds nothing. Written one at a time, oldest first; `flush` runs for
// every new row, after any successful tenancy write, on the node's timer (a third of the lease) and
// once at close. A row failing for another reason than an unreachable database is logged and
// dropped, as before (kept, it would block every row behind it).
import { randomUUID } from 'node:crypto';
import { isDatabaseUnreachable } from '../errors.js';
import type { Logger } from '../log.js';
import type { NewAuditRow } from '../store/audit.js';
import type { AuditQueueStore } from '../store/auditQueue.js';
import { errorMessage } from '../util/errorMessage.js';

export interface AuditOutboxOptions {
  /** The durable queue (the node's SQLite). */
  queue: Pick<AuditQueueStore, 'add' | 'first' | 'remove' | 'size'>;
  /** Writes one row to PostgreSQL; a row whose reference is there already is not written again. */
  write: (row: NewAuditRow, ref: string) => Promise<void>;
  log: Logger;
}

/** The caller of `add`, until its row is written, kept, or refused. */
interface Settle { resolve: () => void; reject: (err: unknown) => void }

export class AuditOutbox {
  private readonly waiting = new Map<string, Settle>();
  private running: Promise<void> | undefined;
  /** Whether a write failed for an unreachable database and the outbox has not drained since. */
  private parked = false;

  constructor(private readonly o: AuditOutboxOptions) {}

  /** Rows waiting for the database. */
  get pending(): number {
    return this.o.queue.size;
  }

  /** On disk when this returns (a failing disk rejects); resolves once the row is in PostgreSQL or
   *  kept for later (the database unreachable); rejects when its write failed otherwise. */
  add(row: NewAuditRow): Promise<void> {
    const ref = randomUUID();
    try {
      this.o.queue.add(ref, row);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      this.waiting.set(ref, { resolve, reject });
      void this.flush();
    });
  }

  /** The timer's (and close's, and the start's) call: writes what waits. */
  retry(): Promise<void> {
    return this.flush();
  }

  /** Writes the waiting rows in order; one pass at a time (a call during one joins it). */
  flush(): Promise<void> {
    if (!this.running && this.o.queue.first()) this.running = this.drain();
    return this.running ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    let written = 0;
    try {
      for (let head = this.o.queue.first(); head; head = this.o.queue.first()) {
        try {
          await this.o.write(head.row, head.ref);
          this.o.queue.remove(head.ref);
          written++;
          this.settle(head.ref)?.resolve();
        } catch (err) {
          if (isDatabaseUnreachable(err)) return this.park();
          this.o.queue.remove(head.ref);
          const settle = this.settle(head.ref);
          if (settle) settle.reject(err);
          else this.o.log.error('audit log write failed', { action: head.row.action, target: head.row.target, err: errorMessage(err) });
        }
      }
      if (this.parked && written > 0) this.o.log.info('audit rows kept while the cluster database was unreachable are written', { rows: written });
      this.parked = false;
    } finally {
      // In the same step as the loop's last look at the queue: a row added after it starts a pass.
      this.running = undefined;
    }
  }

  /** The database is away: every waiting caller is answered (its row kept on disk), the timer tries again. */
  private park(): void {
    if (!this.parked) this.o.log.warn('audit rows kept until the cluster database is reachable again', { rows: this.pending });
    this.parked = true;
    for (const s of this.waiting.values()) s.resolve();
    this.waiting.clear();
  }

  private settle(ref: string): Settle | undefined {
    const s = this.waiting.get(ref);
    this.waiting.delete(ref);
    return s;
  }
}
