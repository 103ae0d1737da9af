// The idempotency records' key index, kept off the order's commit (issue 19 item 5; migration 15).
// A unique index on (account, id) put each order's entry in its account's leaf: a group commit of
// 32 orders rewrote ~27 leaves of it, a 4 KiB WAL frame each, ~10% of a busy shard's CPU. The
// records are appended to `idempotency` (a rowid table) as before, and their keys are moved into
// `idempotency_keys` (account, id) → record in bulk, every MOVE_MS or MOVE_ROWS records: one write
// per leaf per move instead of per commit.
//
// The invariant, held by every transaction that writes these tables: a record whose id is at or
// below `idempotency_moved.through` has its key in idempotency_keys, a record above it has none (it
// is in the tail), and every record written later gets an id above it (a delete that leaves the
// table's largest id below it lowers it: SQLite gives a new row the largest id + 1). So a key is
// found in idempotency_keys or in the tail, and the tail of a crashed process is found again by its
// ids. Records are found by key only by the shard that owns their account (the only writer of them
// on one node): it holds the tail's keys in memory (the rows above `through` when it started, and
// those it writes), so a statement by key never scans the tail. The move inserts with the keys'
// primary key: a second record of a key (which the shard's check before every claim refuses) would
// be found there and reported, the first one kept.
import type { Db } from './db.js';
import type { Scheduler } from './heldWrites.js';
import { systemScheduler } from './heldWrites.js';
import { isStorageFull } from '../errors.js';
import type { Logger } from '../log.js';
import { errorMessage } from '../util/errorMessage.js';

/** A move at least this often while records wait in the tail. */
export const MOVE_MS = 1_000;
/** ... and as soon as this many wait: a move's pause on the shard stays short (~1-2 ms), and a
 *  restart reads a short tail. */
export const MOVE_ROWS = 2_048;

export interface RecordKeysOptions {
  log?: Pick<Logger, 'warn' | 'error'>;
  /** Where the move's timer comes from (a test's own: moves only when it says). */
  scheduler?: Scheduler;
  moveMs?: number;
  moveRows?: number;
}

export class RecordKeys {
  /** The tail this store knows: account → id → record (rowid), all above `through` when set. */
  private readonly tail = new Map<string, Map<string, number>>();
  private tailSize = 0;
  private timer: unknown;
  /** The armed timer is the one for a full tail (0 ms). */
  private armedSoon = false;
  private failing = false;
  private stopped = false;
  private readonly q;
  private readonly moveTx: () => { moved: number; through: number };
  private readonly scheduler: Scheduler;
  private readonly moveMs: number;
  private readonly moveRows: number;

  constructor(private readonly db: Db, private readonly o: RecordKeysOptions = {}) {
    this.scheduler = o.scheduler ?? systemScheduler;
    this.moveMs = o.moveMs ?? MOVE_MS;
    this.moveRows = o.moveRows ?? MOVE_ROWS;
    this.q = {
      through: db.prepare<[], number>('SELECT through FROM idempotency_moved').pluck(),
      top: db.prepare<[], number>('SELECT coalesce(max(id), 0) FROM idempotency').pluck(),
      tailRows: db.prepare<[number], { id: number; account_id: string; client_order_id: string; expires_at: number }>(
        'SELECT id, account_id, client_order_id, expires_at FROM idempotency WHERE id > ? ORDER BY id'),
      move: db.prepare(`INSERT INTO idempotency_keys (account_id, client_order_id, record, expires_at)
        SELECT account_id, client_order_id, id, expires_at FROM idempotency WHERE id > ? AND id <= ? ORDER BY id ON CONFLICT DO NOTHING`),
      count: db.prepare<[number, number], number>('SELECT count(*) FROM idempotency WHERE id > ? AND id <= ?').pluck(),
      unmoved: db.prepare<[number, number], { id: number; account_id: string; client_order_id: string }>(`SELECT i.id, i.account_id, i.client_order_id FROM idempotency i
        WHERE i.id > ? AND i.id <= ? AND NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.account_id = i.account_id AND k.client_order_id = i.client_order_id AND k.record = i.id)`),
      setThrough: db.prepare('UPDATE idempotency_moved SET through = ? WHERE only = 0'),
      // After a delete: the largest id left is never below `through` (see the invariant above).
      lower: db.prepare('UPDATE idempotency_moved SET through = (SELECT coalesce(max(id), 0) FROM idempotency) WHERE only = 0 AND through > (SELECT coalesce(max(id), 0) FROM idempotency)'),
      keyed: db.prepare<[string, string], number>('SELECT record FROM idempotency_keys WHERE account_id = ? AND client_order_id = ?').pluck(),
      isRecord: db.prepare<[number, string, string], number>('SELECT 1 FROM idempotency WHERE id = ? AND account_id = ? AND client_order_id = ?').pluck(),
      dropKey: db.prepare('DELETE FROM idempotency_keys WHERE account_id = ? AND client_order_id = ?'),
      ofAccount: db.prepare<[string], { client_order_id: string; expires_at: number }>('SELECT client_order_id, expires_at FROM idempotency_keys WHERE account_id = ?'),
    };
    this.moveTx = () => db.transaction(() => this.moveNow()).immediate();
  }

  /**
   * The tail as the database holds it (rows above `through`: this shard's records that a crash
   * left unmoved, and any other's), each handed to `seen` (the claim filter); arms a move if any.
   */
  load(seen: (accountId: string, id: string, expiresAt: number) => void): void {
    this.db.transaction(() => {
      for (const r of this.q.tailRows.iterate(this.q.through.get()!)) {
        this.remember(r.account_id, r.client_order_id, r.id, false);
        seen(r.account_id, r.client_order_id, r.expires_at);
      }
    })();
    if (this.tailSize > 0) this.arm(this.moveMs);
  }

  /** The keys moved of an account's records (the claim filter's load, once per account). */
  ofAccount(accountId: string): Iterable<{ client_order_id: string; expires_at: number }> {
    return this.q.ofAccount.iterate(accountId);
  }

  /** A record just written (inside its transaction), under its key in the tail. */
  wrote(accountId: string, id: string, record: number): void {
    this.remember(accountId, id, record, true);
    if (this.tailSize >= this.moveRows) {
      if (!this.armedSoon) this.arm(0);
    } else if (this.timer === undefined) this.arm(this.moveMs);
  }

  private remember(accountId: string, id: string, record: number, replace: boolean): void {
    let ids = this.tail.get(accountId);
    if (!ids) this.tail.set(accountId, (ids = new Map()));
    const had = ids.get(id);
    if (had !== undefined && !replace) return;
    ids.set(id, record);
    if (had === undefined) this.tailSize++;
  }

  /** The record the tail names for the key, unchecked: it may have been purged, or its commit
   *  rolled back, and its id taken by another record (a statement by it checks the key too). */
  inTail(accountId: string, id: string): number | undefined {
    return this.tail.get(accountId)?.get(id);
  }

  /** The record of the key among the moved keys. */
  keyed(accountId: string, id: string): number | undefined {
    return this.q.keyed.get(accountId, id);
  }

  /** The id of the key's record (the tail's, checked, then the moved keys'), or undefined: no record. */
  recordOf(accountId: string, id: string): number | undefined {
    const r = this.inTail(accountId, id);
    if (r !== undefined && this.q.isRecord.get(r, accountId, id) !== undefined) return r;
    return this.q.keyed.get(accountId, id);
  }

  /** Inside the transaction that deletes the key's record: its moved key goes with it. (The tail
   *  may still name the record: the transaction may yet roll back, and a statement by the tail's
   *  record checks its key; a new record of the key replaces it there.) */
  forget(accountId: string, id: string): void {
    this.q.dropKey.run(accountId, id);
  }

  /** Inside a transaction that deleted records, after the deletes. */
  deleted(): void {
    this.q.lower.run();
  }

  /** Moves the tail's keys now, in one IMMEDIATE transaction with `through`; once it has committed,
   *  they leave memory. Returns how many. Not inside another transaction (which could still roll
   *  the move back): 0, nothing moved. */
  move(): number {
    if (this.db.inTransaction) return 0;
    const { moved, through } = this.moveTx();
    this.prune(through);
    return moved;
  }

  private moveNow(): { moved: number; through: number } {
    const from = this.q.through.get()!;
    const to = this.q.top.get()!;
    let moved = 0;
    if (to > from) {
      moved = this.q.move.run(from, to).changes;
      if (moved !== this.q.count.get(from, to)) {
        // Two records of one key: the first keeps the key, the other is reported (never found by key).
        for (const r of this.q.unmoved.iterate(from, to)) {
          this.o.log?.error('idempotency: a second record of one clientOrderId (the first is kept as the record)', { accountId: r.account_id, clientOrderId: r.client_order_id, record: r.id });
        }
      }
      this.q.setThrough.run(to);
    } else if (to < from) {
      this.q.setThrough.run(to);
    }
    return { moved, through: Math.max(from, to) };
  }

  /** The tail's keys moved (at or below `through`) leave memory. */
  private prune(through: number): void {
    for (const [account, ids] of this.tail) {
      for (const [id, r] of ids) {
        if (r <= through) {
          ids.delete(id);
          this.tailSize--;
        }
      }
      if (ids.size === 0) this.tail.delete(account);
    }
  }

  /** The move's timer, due in `ms` (one armed at a time: an earlier one is replaced). */
  private arm(ms: number): void {
    if (this.stopped) return;
    if (this.timer !== undefined) this.scheduler.clearTimeout(this.timer);
    this.armedSoon = ms === 0;
    this.timer = this.scheduler.setTimeout(() => this.onTimer(), ms);
  }

  private onTimer(): void {
    this.timer = undefined;
    this.armedSoon = false;
    if (this.stopped || !this.db.open || this.tailSize === 0) return;
    try {
      this.move();
      this.failing = false;
    } catch (err) {
      // Rolled back: the records stay found from the tail, and the move is tried again. Nothing
      // waits for it, so a full disk is not a writer waiting for room (fullDisk.ts): no line.
      if (!isStorageFull(err) && !this.failing) this.o.log?.warn('cannot move idempotency keys; trying again', { err: errorMessage(err) });
      this.failing = true;
    }
    if (this.tailSize > 0) this.arm(this.moveMs);
  }

  /** No more moves from the timer (a graceful stop first moves what it can). */
  stop(): void {
    if (this.timer !== undefined) this.scheduler.clearTimeout(this.timer);
    this.timer = undefined;
    this.armedSoon = false;
    if (!this.stopped && this.db.open && this.tailSize > 0) {
      try {
        this.move();
      } catch {
        // Found again from the tail at the next start.
      }
    }
    this.stopped = true;
  }
}
