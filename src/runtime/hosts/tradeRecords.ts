// The idempotency records of a shard's accounts (TradeDesk in accountTrade.ts extends them with the
// trade path): which records are actors in memory and which are let go to their rows, restoring them,
// waiting for a record's broker call, and the outcomes given to their records in one commit a turn.
import { createActor, type Actor } from 'xstate';
import { idempotencyMachine, type IdempotencyContext, type StoredResult } from '../../../actors/idempotency.js';
import { FreshRecord, type FreshRecordActions } from '../../../actors/idempotencyFresh.js';
import type { Logger } from '../../log.js';
import { systemClock, type Clock } from '../../util/clock.js';
import { isStorageFull } from '../../errors.js';
import { FULL_DISK_RETRY_MS, FullDisk } from '../../store/fullDisk.js';
import { HeldWrites } from '../../store/heldWrites.js';
import type { IdempotencyStore, IdemRow } from '../../store/idempotency.js';
import { KeyedTable } from '../../util/keyedTable.js';
import { RecordExistsError, stoppedError, type IdemActor, type Outcome, type RecordEvent } from './recordClaim.js';
import { uncertainForNowError } from './tradeRequest.js';

export type IdemSnapshot = ReturnType<Actor<typeof idempotencyMachine>['getSnapshot']> | FreshRecord;

/** How often expired records are deleted from SQLite (by the expiry index). */
const SWEEP_MS = 60_000;

/** A record's actor, and while its one broker call is in flight, who waits for it. */
export interface Rec {
  /** Its key in `records`, made once: built again and hashed anew at each lookup, it cost the shard a string and a hash an order. */
  readonly key: string;
  actor: IdemActor;
  /** Settled and let go: its actor is stopped, its last snapshot still answers who held it. */
  evicted?: boolean;
  /** Lost after an atomic claim: kept in memory, its row may have gone with a failed commit. */
  pinned?: boolean;
  /** From the claim until the actor has taken the call's outcome and its row has it (a full disk
   *  keeps it busy until the outcome is written: same-id requests wait for that). */
  busy: boolean;
  /** The claiming request, until the outcome is known. */
  reply?: { resolve(ev: Outcome): void; reject(err: Error): void };
  /** Other requests with the same id, until the actor has taken the outcome. */
  waiters?: { resolve(): void; reject(err: Error): void }[];
}

/**
 * The records of a shard's accounts. Only records with work to do are actors in memory: a claim
 * until its outcome is written, and a record restored `sent` until the broker was asked. A settled
 * record (result, uncertain) is let go: its row is the record, and a later request with its id
 * finds the row when its own claim collides with it, and brings it back as an actor to answer.
 * Kept in memory for their 24 h, records cost ~7.6 KB each (actor, timer, result): a bot sending
 * 10 orders a second would have held 6.6 GB after a day.
 */
export abstract class TradeRecords {
  /** Not a Map: see KeyedTable (under load a Map here promoted ~0.7 MB of settled records per scavenge). */
  protected readonly records = new KeyedTable<string, Rec>();
  private readonly sweep: NodeJS.Timeout;
  // Provided once: machine.provide() costs hundreds of µs, far too much per order.
  private readonly machine;
  // One observer for every record: an action that throws (a failed SQLite write) puts the actor in
  // error; without an error observer xstate would rethrow it from a timer and kill the shard.
  private readonly observer;
  /** Outcomes known but not yet given to their records (see `outcome`). */
  private queue: [Rec, RecordEvent][] = [];
  private flushQueued = false;
  /** In `flush`: the machine's outcome writes are left to `write` (one commit, kept and retried on a full disk). */
  private deferring = false;
  /** Records whose outcome a full disk kept from their rows (busy, in memory), written every retryMs. */
  private readonly unwritten: HeldWrites<Rec>;

  constructor(
    protected readonly store: IdempotencyStore, protected readonly log: Logger, protected readonly clock: Clock = systemClock,
    /** The shard's: an outcome that meets a full DATA_DIR waits for room (src/store/fullDisk.ts). */
    fullDisk: FullDisk = new FullDisk({ log, retryMs: FULL_DISK_RETRY_MS }),
  ) {
    this.unwritten = new HeldWrites({ fullDisk, what: 'idempotency outcomes', retry: (recs) => this.write(recs) });
    this.observer = {
      // A collision with a settled record is how one is found again, not a failure.
      error: (err: unknown) => err instanceof RecordExistsError || this.log.error('idempotency actor failed', { err }),
    };
    this.sweep = setInterval(() => this.purgeExpired(), SWEEP_MS);
    this.sweep.unref();
    const a = this.actions;
    a.persistSent = (c) => {
      // Durable before `send` returns; the host calls the broker only after that.
      if (!this.store.insertSent(c.accountId, c.clientOrderId, c.paramsHash, this.clock.now(), c.expiresAt)) {
        throw new RecordExistsError(`idempotency record ${c.clientOrderId} already exists`);
      }
    };
    a.persistResult = (c) => {
      if (!this.deferring) this.store.setResult(c.accountId, c.clientOrderId, c.result!.status, c.result!.json);
    };
    a.persistUncertain = (c) => {
      if (!this.deferring) this.store.setUncertain(c.accountId, c.clientOrderId);
    };
    a.forget = (self, c) => {
      if (!this.deferring) this.store.remove(c.accountId, c.clientOrderId);
      const k = this.key(c.accountId, c.clientOrderId);
      if ((this.records.get(k)?.actor as unknown) === self) this.records.delete(k);
    };
    this.machine = idempotencyMachine.provide({
      actions: {
        persistSent: (_x, c: IdempotencyContext) => a.persistSent(c),
        persistResult: (_x, c: IdempotencyContext) => a.persistResult(c),
        persistUncertain: (_x, c: IdempotencyContext) => a.persistUncertain(c),
        forget: ({ self }, c: IdempotencyContext) => a.forget(self, c),
      },
    });
  }

  /** The machine's actions, for the xstate actors and the plain fresh records alike. */
  private readonly actions = {} as FreshRecordActions;

  protected key(accountId: string, id: string) {
    return `${accountId}\u0000${id}`;
  }

  count(): number {
    return this.records.size;
  }

  protected start(row: Pick<IdemRow, 'account_id' | 'client_order_id' | 'params_hash' | 'expires_at'> & { phase: 'new' | IdemRow['phase']; result?: StoredResult }): Rec {
    const input = { accountId: row.account_id, clientOrderId: row.client_order_id, paramsHash: row.params_hash, expiresAt: row.expires_at };
    if (row.phase === 'new') return this.startFresh(this.key(row.account_id, row.client_order_id), input);
    const actor = createActor(this.machine, { input: { ...input, phase: row.phase, ...(row.result ? { result: row.result } : {}) } });
    actor.subscribe(this.observer);
    const rec: Rec = { key: this.key(row.account_id, row.client_order_id), actor, busy: false };
    this.records.set(rec.key, rec);
    actor.start();
    return rec;
  }

  /** A fresh claim's record, under its key `k`: the machine's plain twin (actors/idempotencyFresh.ts). */
  protected startFresh(k: string, input: ConstructorParameters<typeof FreshRecord>[0]): Rec {
    const rec: Rec = { key: k, actor: new FreshRecord(input, this.actions, this.observer.error), busy: false };
    this.records.set(k, rec);
    return rec;
  }

  /** A record as its row says (result, uncertain, or sent → recovering), as an actor again. */
  protected restore(row: IdemRow): Rec {
    const result = row.phase === 'result' && row.status !== null ? { status: row.status, json: row.result_json ?? 'null' } : undefined;
    return this.start({ ...row, ...(result ? { result } : {}) });
  }

  /** Restores the records of this shard's accounts that have work left: those restored `sent`. */
  rehydrate(owns: (accountId: string) => boolean, now: number): number {
    this.store.purgeExpired(now);
    let n = 0;
    for (const row of this.store.unsettled(now)) {
      if (!owns(row.account_id) || this.records.has(this.key(row.account_id, row.client_order_id))) continue;
      this.restore(row);
      n++;
    }
    return n;
  }

  private purgeExpired(): void {
    try {
      this.store.purgeExpired(this.clock.now());
    } catch (err) {
      this.log.warn('cannot delete expired idempotency records', { err });
    }
  }

  /** Lets a settled record go (see the class comment). */
  protected evict(rec: Rec): void {
    if (rec.evicted || rec.busy || rec.pinned) return;
    const s = rec.actor.getSnapshot();
    if (s.status !== 'active' || !(s.matches('result') || s.matches('uncertain'))) return;
    rec.evicted = true;
    rec.actor.stop();
    if (this.records.get(rec.key) === rec) this.records.delete(rec.key);
  }

  /** The record's broker call (or broker question) is over: same-id requests waiting for it go on. */
  protected idle(rec: Rec): void {
    rec.busy = false;
    const w = rec.waiters;
    rec.waiters = undefined;
    if (w) for (const x of w) x.resolve();
  }

  /** The record's state once no broker call of it is in flight any more. */
  protected async settled(rec: Rec): Promise<IdemSnapshot> {
    if (rec.busy) await new Promise<void>((resolve, reject) => (rec.waiters ??= []).push({ resolve, reject }));
    const s = rec.actor.getSnapshot();
    if (s.status === 'error') {
      if (s.error instanceof RecordExistsError) throw s.error;
      // A write of the record that failed (a recovered outcome on a full disk, a database error): its
      // row is as it was, so the record leaves memory and the next request restores it from the row
      // (before, it stayed in error and answered every later request so until a restart). A full
      // disk answers 503 STORAGE_UNAVAILABLE; anything else 409 for this attempt only, not a raw 500.
      if (this.records.get(rec.key) === rec) this.records.delete(rec.key);
      if (isStorageFull(s.error)) throw s.error;
      throw uncertainForNowError('the outcome of an earlier request with this clientOrderId could not be recorded just now (a database error, logged): retry this request shortly');
    }
    if (s.status === 'stopped' && !rec.evicted) throw stoppedError();
    return s;
  }

  /**
   * The record's broker call settled. The claiming request is answered at once; the record takes
   * the outcome (and writes it) a moment later, in `flush`, together with every other outcome of
   * this event-loop turn in one SQLite commit, after the reply has left. Until then the record
   * stays `sent` and `busy`: a retry with the same id waits for it, so it still gets the stored
   * result. A crash in between leaves the durable row 'sent', which rehydrates as 'uncertain'
   * (a retry answers 409, never a second order).
   */
  protected outcome(rec: Rec, ev: RecordEvent, err?: unknown): void {
    const reply = rec.reply;
    if (!reply) return; // the host stopped meanwhile: its requests were failed already
    rec.reply = undefined;
    if (err !== undefined && ev.type === 'lost') this.log.warn('order outcome unknown after send', { err });
    this.queue.push([rec, ev]);
    if (!this.flushQueued) {
      this.flushQueued = true;
      setImmediate(() => this.flush());
    }
    reply.resolve(ev);
  }

  /** Gives the queued outcomes to their records, writes them (one commit), then wakes their waiters. */
  private flush(): void {
    this.flushQueued = false;
    const q = this.queue;
    if (q.length === 0) return;
    this.queue = [];
    // The records take their outcomes in memory; `write` puts them on disk, from their state.
    this.deferring = true;
    try {
      for (const [rec, ev] of q) rec.actor.send(ev);
    } finally {
      this.deferring = false;
    }
    this.write(q.map(([rec]) => rec));
  }

  /**
   * Writes the records' outcomes, as their state in memory says, in one commit; then same-id
   * requests waiting for them go on and they are let go. On a full disk nothing is let go: they
   * stay busy in memory (a same-id request waits, then gets the outcome from memory once its row
   * has it) and the commit is tried again every retryMs, until it is done or the host stops (their
   * rows then stay 'sent': recovering after a restart, as after a crash). Any other failure is
   * logged and the records are settled as they are (rows 'sent', as above).
   */
  private write(recs: Rec[]): void {
    try {
      const written = this.unwritten.attempt(() => this.store.batch(() => {
        for (const rec of recs) this.writeOutcome(rec);
      }), recs);
      if (!written) {
        for (const rec of recs) {
          rec.busy = true;
          // A discarded record left the table (its id is free once its row is gone): back until then.
          if (!this.records.has(rec.key)) this.records.set(rec.key, rec);
        }
        return;
      }
    } catch (err) {
      this.log.error('cannot commit idempotency outcomes', { err });
    }
    for (const rec of recs) {
      this.idle(rec);
      const s = rec.actor.getSnapshot();
      if (s.matches('discarded') && this.records.get(rec.key) === rec) this.records.delete(rec.key);
      // Its waiters read the last snapshot, which a stopped actor keeps.
      this.evict(rec);
    }
  }

  /** A record's outcome (result, uncertain, or discarded: no row) to its row, in the caller's transaction. */
  private writeOutcome(rec: Rec): void {
    const s = rec.actor.getSnapshot();
    const c = s.context;
    if (s.matches('result')) this.store.setResult(c.accountId, c.clientOrderId, c.result!.status, c.result!.json);
    else if (s.matches('uncertain')) this.store.setUncertain(c.accountId, c.clientOrderId);
    else if (s.matches('discarded')) this.store.remove(c.accountId, c.clientOrderId);
  }

  /** A settled record found on disk when claiming its id: back as an actor (expired: removed). */
  protected restoreSettled(accountId: string, clientOrderId: string): boolean {
    const row = this.store.get(accountId, clientOrderId);
    if (row && row.expires_at > this.clock.now()) this.restore(row);
    else if (row) this.store.remove(accountId, clientOrderId); // expired, not swept yet
    return row !== undefined;
  }

  stop(): void {
    clearInterval(this.sweep);
    // Outcomes already answered are written first (a graceful stop loses nothing; on a disk still
    // full those rows stay 'sent', recovering after the restart).
    this.flush();
    this.unwritten.stop();
    for (const rec of this.records.values()) this.halt(rec);
    this.records.clear();
    // The keys of the records written since the last move, moved now (a restart reads no tail).
    this.store.stop();
  }

  /** Cluster mode: these accounts went to another node; their records here stop (the cluster's
   *  ledger in PostgreSQL is what the next owner answers retries from). */
  release(accountIds: ReadonlySet<string>): void {
    this.flush();
    this.unwritten.flush();
    for (const [k, rec] of this.records) {
      if (!accountIds.has(k.slice(0, k.indexOf('\u0000')))) continue;
      this.halt(rec);
      this.records.delete(k);
    }
  }

  private halt(rec: Rec): void {
    rec.actor.stop();
    const reply = rec.reply;
    const waiters = rec.waiters;
    rec.reply = rec.waiters = undefined;
    rec.busy = false;
    reply?.reject(stoppedError());
    if (waiters) for (const w of waiters) w.reject(stoppedError());
  }
}
