// Audit rows in cluster mode whose write to PostgreSQL failed because the database was unreachable
// (a create answered after PostgreSQL dropped, any management action during a blip): kept here, in
// the order they were made, and written again until they land, so the audit log (a record of value)
// does not lose them. Written one at a time, oldest first; `flush` is called by every new row, after
// any successful tenancy write and by the node's timer (a third of the lease), and once at close.
// Bounded: beyond `limit` rows the oldest is dropped, counted, and the count logged at the next
// `retry`. A row failing for another reason is logged and dropped, as before.
import { isDatabaseUnreachable } from '../errors.js';
import type { Logger } from '../log.js';
import type { NewAuditRow } from '../store/audit.js';
import { errorMessage } from '../util/errorMessage.js';

export interface AuditOutboxOptions {
  write: (row: NewAuditRow) => Promise<void>;
  log: Logger;
  /** Rows kept at most (default 10,000). */
  limit?: number;
}

interface Entry {
  row: NewAuditRow;
  /** The caller of `add`, until its row is written, kept, or refused. */
  settle?: { resolve: () => void; reject: (err: unknown) => void };
}

export class AuditOutbox {
  private readonly queue: Entry[] = [];
  private running: Promise<void> | undefined;
  /** Rows dropped (outbox full) not yet logged. */
  private dropped = 0;
  /** Whether a write failed for an unreachable database and the outbox has not drained since. */
  private parked = false;

  constructor(private readonly o: AuditOutboxOptions) {}

  /** Rows waiting for the database. */
  get pending(): number {
    return this.queue.length;
  }

  /** Resolves once the row is written or kept for later; rejects when its write failed otherwise. */
  add(row: NewAuditRow): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ row, settle: { resolve, reject } });
      if (this.queue.length > (this.o.limit ?? 10_000)) {
        this.queue.shift()!.settle?.resolve();
        this.dropped++;
      }
      void this.flush();
    });
  }

  /** The timer's (and close's) call: logs rows dropped since the last one, then writes what waits. */
  retry(): Promise<void> {
    if (this.dropped > 0) {
      this.o.log.error('audit rows dropped: the outbox was full while the cluster database was unreachable', { dropped: this.dropped, limit: this.o.limit ?? 10_000 });
      this.dropped = 0;
    }
    return this.flush();
  }

  /** Writes the waiting rows in order; one pass at a time (a call during one joins it). */
  flush(): Promise<void> {
    if (!this.running && this.queue.length > 0) this.running = this.drain();
    return this.running ?? Promise.resolve();
  }

  private async drain(): Promise<void> {
    let written = 0;
    try {
      for (let head = this.queue[0]; head; head = this.queue[0]) {
        try {
          await this.o.write(head.row);
          written++;
          this.remove(head)?.resolve();
        } catch (err) {
          if (isDatabaseUnreachable(err)) return this.park();
          const settle = this.remove(head);
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

  /** The database is away: every waiting caller is answered (its row kept), the timer tries again. */
  private park(): void {
    if (!this.parked) this.o.log.warn('audit rows kept until the cluster database is reachable again', { rows: this.queue.length });
    this.parked = true;
    for (const e of this.queue) {
      e.settle?.resolve();
      e.settle = undefined;
    }
  }

  /** Takes the entry out (the full outbox may have dropped it meanwhile); its caller, if still waiting. */
  private remove(e: Entry): Entry['settle'] {
    const i = this.queue.indexOf(e);
    if (i >= 0) this.queue.splice(i, 1);
    const settle = e.settle;
    e.settle = undefined;
    return settle;
  }
}
