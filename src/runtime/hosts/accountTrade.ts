// Trading with idempotency (SPEC §3 Idempotency record, §7 409/422, §8), inside the account's
// shard. All requests of an account run on this one thread, so "look up the record, else claim
// the id" happens with no await in between and needs no lock: two concurrent requests with the
// same id find each other here, and the second one waits for the first one's result.
import { createActor, type Actor } from 'xstate';
import { idempotencyMachine, NotSentError, type IdempotencyContext, type StoredResult } from '../../../actors/idempotency.js';
import { FreshRecord, type FreshRecordActions } from '../../../actors/idempotencyFresh.js';
import type { BrokerConnection } from '../../broker/types.js';
import type { RequestLookup, TradeResult } from '../../market/orders.js';
import { apiError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { systemClock, type Clock } from '../../util/clock.js';
import type { IdempotencyStore, IdemRow } from '../../store/idempotency.js';
import type { TradeReply } from './accountCommands.js';
import type { TradeOp } from '../../market/orderSchemas.js';
import { KeyedTable } from '../../util/keyedTable.js';
import type { AccountEntry, Lease } from './accountEntry.js';
import { brokerFailure } from '../brokerFailures.js';
import { answer, assertClientOrderId, brokerRequestId, execute, notSentError, paramsHash, prepare, sendFailed, type Prepared } from './tradeRequest.js';
import { HeldOutcome, RecordClaim, RecordExistsError, replyOf, stoppedError, tradeReply, UnclaimedError, type IdemActor, type Outcome } from './recordClaim.js';

export { answer, brokerRequestId, CLIENT_ORDER_ID, paramsHash, prepare } from './tradeRequest.js';

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

type IdemSnapshot = ReturnType<Actor<typeof idempotencyMachine>['getSnapshot']> | FreshRecord;

/**
 * What the broker's answer about a record restored `sent` means. Found: it executed, and its result
 * is the record's. Not found by a broker in another process (a bridge): it may still be in transit
 * after our crash, so the record is uncertain (409, nothing sent again). Not found by a broker in
 * this process (the embedded simulator, which journals executions in our database and died with
 * us): it never executed and never will, so the id is freed (`notExecuted`) and a retry sends the order,
 * instead of 24 h of 409 for an order that certainly does not exist.
 */
export function recoveredOutcome(found: RequestLookup | null, brokerInProcess: boolean): Outcome {
  if (found) return { type: 'done', result: answer(found.result) };
  return brokerInProcess ? { type: 'notExecuted' } : { type: 'lost' };
}

/** How often expired records are deleted from SQLite (by the expiry index). */
const SWEEP_MS = 60_000;

/** A record's actor, and while its one broker call is in flight, who waits for it. */
interface Rec {
  actor: IdemActor;
  /** Settled and let go: its actor is stopped, its last snapshot still answers who held it. */
  evicted?: boolean;
  /** Lost after an atomic claim: kept in memory, its row may have gone with a failed commit. */
  pinned?: boolean;
  /** From the claim until the actor has taken the call's outcome. */
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
export class TradeDesk {
  /** Not a Map: see KeyedTable (under load a Map here promoted ~0.7 MB of settled records per scavenge). */
  private readonly records = new KeyedTable<string, Rec>();
  private readonly sweep: NodeJS.Timeout;
  // Provided once: machine.provide() costs hundreds of µs, far too much per order.
  private readonly machine;
  // One observer for every record: an action that throws (a failed SQLite write) puts the actor in
  // error; without an error observer xstate would rethrow it from a timer and kill the shard.
  private readonly observer;
  /** Outcomes known but not yet given to their records (see `outcome`). */
  private queue: [Rec, Outcome][] = [];
  private flushQueued = false;

  constructor(private readonly store: IdempotencyStore, private readonly log: Logger, private readonly clock: Clock = systemClock) {
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
    a.persistResult = (c) => this.store.setResult(c.accountId, c.clientOrderId, c.result!.status, c.result!.json);
    a.persistUncertain = (c) => this.store.setUncertain(c.accountId, c.clientOrderId);
    a.forget = (self, c) => {
      this.store.remove(c.accountId, c.clientOrderId);
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

  private key(accountId: string, id: string) {
    return `${accountId}\u0000${id}`;
  }

  count(): number {
    return this.records.size;
  }

  private start(row: Pick<IdemRow, 'account_id' | 'client_order_id' | 'params_hash' | 'expires_at'> & { phase: 'new' | IdemRow['phase']; result?: StoredResult }): Rec {
    const input = { accountId: row.account_id, clientOrderId: row.client_order_id, paramsHash: row.params_hash, expiresAt: row.expires_at };
    if (row.phase === 'new') return this.startFresh(this.key(row.account_id, row.client_order_id), input);
    const actor = createActor(this.machine, { input: { ...input, phase: row.phase, ...(row.result ? { result: row.result } : {}) } });
    actor.subscribe(this.observer);
    const rec: Rec = { actor, busy: false };
    this.records.set(this.key(row.account_id, row.client_order_id), rec);
    actor.start();
    return rec;
  }

  /** A fresh claim's record, under its key `k`: the machine's plain twin (actors/idempotencyFresh.ts). */
  private startFresh(k: string, input: ConstructorParameters<typeof FreshRecord>[0]): Rec {
    const rec: Rec = { actor: new FreshRecord(input, this.actions, this.observer.error), busy: false };
    this.records.set(k, rec);
    return rec;
  }

  /** A record as its row says (result, uncertain, or sent → recovering), as an actor again. */
  private restore(row: IdemRow): Rec {
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
  private evict(rec: Rec): void {
    if (rec.evicted || rec.busy || rec.pinned) return;
    const s = rec.actor.getSnapshot();
    if (s.status !== 'active' || !(s.matches('result') || s.matches('uncertain'))) return;
    rec.evicted = true;
    rec.actor.stop();
    const k = this.key(s.context.accountId, s.context.clientOrderId);
    if (this.records.get(k) === rec) this.records.delete(k);
  }

  /** The record's broker call (or broker question) is over: same-id requests waiting for it go on. */
  private idle(rec: Rec): void {
    rec.busy = false;
    const w = rec.waiters;
    rec.waiters = undefined;
    if (w) for (const x of w) x.resolve();
  }

  /** The record's state once no broker call of it is in flight any more. */
  private async settled(rec: Rec): Promise<IdemSnapshot> {
    if (rec.busy) await new Promise<void>((resolve, reject) => (rec.waiters ??= []).push({ resolve, reject }));
    const s = rec.actor.getSnapshot();
    if (s.status === 'error') throw s.error;
    if (s.status === 'stopped' && !rec.evicted) throw stoppedError();
    return s;
  }

  /** Answers from an existing record, waiting for it if its send is still in flight. */
  private async existing(rec: Rec, hash: string, entry: AccountEntry): Promise<TradeReply | undefined> {
    if (rec.actor.getSnapshot().context.paramsHash !== hash) {
      throw apiError('IDEMPOTENCY_KEY_REUSED', 'this clientOrderId was already used with different order parameters; nothing was sent');
    }
    let s = await this.settled(rec);
    if (s.matches('recovering')) s = await this.recover(rec, entry);
    this.evict(rec);
    if (s.matches('result')) return tradeReply(s.context.result!, true);
    if (s.matches('uncertain')) {
      throw apiError('IDEMPOTENCY_UNCERTAIN', 'the outcome of an earlier request with this clientOrderId is unknown (its reply was lost after it was sent): check /OpenedOrders and /OrderHistory, then use a new id');
    }
    return undefined; // discarded (never sent) or expired: the id is free again
  }

  /**
   * A record restored in `sent` (the process stopped while its order was at the broker, or before
   * its outcome was written): asks the broker what it did with the record's request id. Executed:
   * the broker's result, replayed like the first answer. Unknown to the broker: see
   * `recoveredOutcome`. No answer now: still recovering, 409 for this attempt only.
   */
  private async recover(rec: Rec, entry: AccountEntry): Promise<IdemSnapshot> {
    const c = rec.actor.getSnapshot().context;
    rec.busy = true;
    try {
      let found: Awaited<ReturnType<BrokerConnection['lookupRequest']>>;
      let inProcess = false;
      try {
        const lease = await entry.acquire();
        try {
          inProcess = lease.conn.inProcess === true;
          found = await lease.conn.lookupRequest(brokerRequestId(c.accountId, c.clientOrderId, c.expiresAt));
        } finally {
          lease.release();
        }
      } catch (err) {
        this.log.warn('cannot ask the broker about an order sent before a restart', { err });
        throw apiError('IDEMPOTENCY_UNCERTAIN', 'the outcome of an earlier request with this clientOrderId is not known yet (the gateway restarted while it was at the broker, and the broker cannot be asked now): retry this request shortly');
      }
      if (rec.actor.getSnapshot().matches('recovering')) rec.actor.send(recoveredOutcome(found, inProcess));
    } finally {
      this.idle(rec);
    }
    return this.settled(rec);
  }

  /**
   * The record's broker call settled. The claiming request is answered at once; the record takes
   * the outcome (and writes it) a moment later, in `flush`, together with every other outcome of
   * this event-loop turn in one SQLite commit, after the reply has left. Until then the record
   * stays `sent` and `busy`: a retry with the same id waits for it, so it still gets the stored
   * result. A crash in between leaves the durable row 'sent', which rehydrates as 'uncertain'
   * (a retry answers 409, never a second order).
   */
  private outcome(rec: Rec, ev: Outcome, err?: unknown): void {
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

  /** Gives the queued outcomes to their records (their writes in one commit), then wakes their waiters. */
  private flush(): void {
    this.flushQueued = false;
    const q = this.queue;
    if (q.length === 0) return;
    this.queue = [];
    try {
      this.store.batch(() => {
        for (const [rec, ev] of q) rec.actor.send(ev);
      });
    } catch (err) {
      // The commit failed: the rows stay 'sent' (→ uncertain after a restart), the actors hold the outcome.
      this.log.error('cannot commit idempotency outcomes', { err });
    } finally {
      for (const [rec] of q) {
        this.idle(rec);
        // Its waiters read the last snapshot, which a stopped actor keeps.
        this.evict(rec);
      }
    }
  }

  /** A trade request. The usual order (a new id, a usable connection, a broker that claims atomically)
   *  is claimed and booked at once and answered by one continuation, with no async function of its own
   *  (~0.4 KB of young garbage an order, issue 19); anything else, and a claim that did not happen,
   *  goes through `tradeRecorded`, which waits for whatever it must. */
  trade(entry: AccountEntry, op: TradeOp, args: Record<string, unknown>, clientOrderId: string | undefined): Promise<TradeReply> {
    try {
      const prep = prepare(op, args, entry);
      if (clientOrderId === undefined) return this.tradeUnrecorded(entry, prep);
      assertClientOrderId(clientOrderId);
      const hash = paramsHash(op, prep.canonical);
      const k = this.key(entry.accountId, clientOrderId);
      const lease = this.records.has(k) ? undefined : entry.tryAcquire();
      if (lease?.conn.claimsAtomically !== true) return this.tradeRecorded(entry, prep, hash, k, clientOrderId, lease);
      const rec = this.newRecord(entry, hash, k, clientOrderId);
      return this.sendAtomically(rec, prep, lease).then(replyOf, (err: unknown) => {
        this.unclaimed(err, rec, k, entry.accountId, clientOrderId);
        return this.tradeRecorded(entry, prep, hash, k, clientOrderId, undefined);
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private async tradeUnrecorded(entry: AccountEntry, prep: Prepared): Promise<TradeReply> {
    const lease = entry.tryAcquire() ?? (await entry.acquire());
    try {
      return tradeReply(answer(await prep.run(lease.conn, {})), false);
    } catch (err) {
      throw brokerFailure(err, 'trade');
    } finally {
      lease.release();
    }
  }

  /** A fresh record claiming the id, not yet sent. */
  private newRecord(entry: AccountEntry, hash: string, k: string, clientOrderId: string): Rec {
    return this.startFresh(k, { accountId: entry.accountId, clientOrderId, paramsHash: hash, expiresAt: this.clock.now() + IDEMPOTENCY_TTL_MS });
  }

  /** An atomic send failed: anything but an UnclaimedError is thrown on. Never claimed, nothing
   *  executed: the id has a settled row (back as an actor: returns, the caller looks again), or the
   *  order could not go out (thrown). Same-id waiters find the record gone and start over. */
  private unclaimed(err: unknown, rec: Rec, k: string, accountId: string, clientOrderId: string): void {
    if (!(err instanceof UnclaimedError)) throw err;
    if (this.records.get(k) === rec) this.records.delete(k);
    rec.evicted = true;
    rec.actor.stop();
    this.idle(rec);
    if (this.restoreSettled(accountId, clientOrderId)) return;
    if (err.cause instanceof NotSentError) throw notSentError();
    throw err.cause;
  }

  /** An idempotent trade, from its record if the id has one (waiting for its send, if in flight),
   *  else claimed and sent. `held`: a lease already taken for it. */
  private async tradeRecorded(entry: AccountEntry, prep: Prepared, hash: string, k: string, clientOrderId: string, held: Lease | undefined): Promise<TradeReply> {
    for (;;) {
      const found = this.records.get(k);
      if (found) {
        held?.release();
        held = undefined;
        const r = await this.existing(found, hash, entry);
        if (r) return r;
        if (this.records.get(k) === found) this.records.delete(k);
        continue;
      }
      const lease = held ?? entry.tryAcquire() ?? (await entry.acquire());
      held = undefined;
      // An await above may have let other requests run: one may have claimed the id meanwhile.
      if (this.records.has(k)) {
        lease.release();
        continue;
      }
      const rec = this.newRecord(entry, hash, k, clientOrderId);
      let ev: Outcome;
      if (lease.conn.claimsAtomically === true) {
        try {
          ev = await this.sendAtomically(rec, prep, lease);
        } catch (err) {
          this.unclaimed(err, rec, k, entry.accountId, clientOrderId);
          continue;
        }
      } else {
        // `send` runs persistSent synchronously: once it returns with the record in `sent`, the
        // record is committed and the order may go to the broker.
        rec.actor.send({ type: 'send' });
        const claimed = rec.actor.getSnapshot();
        if (claimed.status !== 'active' || !claimed.matches('sent')) {
          lease.release();
          if (this.records.get(k) === rec) this.records.delete(k);
          if (claimed.status === 'error' && claimed.error instanceof RecordExistsError) {
            this.restoreSettled(entry.accountId, clientOrderId);
            continue;
          }
          throw claimed.status === 'error' ? claimed.error : stoppedError();
        }
        rec.busy = true;
        const outcome = new Promise<Outcome>((resolve, reject) => {
          rec.reply = { resolve, reject };
        });
        execute(prep, lease, brokerRequestId(entry.accountId, clientOrderId, rec.actor.getSnapshot().context.expiresAt)).then(answer).then(
          (result) => this.outcome(rec, { type: 'done', result }),
          (err: unknown) => this.outcome(rec, err instanceof NotSentError ? { type: 'failed' } : { type: 'lost' }, err),
        );
        ev = await outcome;
      }
      return replyOf(ev);
    }
  }

  /** A settled record found on disk when claiming its id: back as an actor (expired: removed). */
  private restoreSettled(accountId: string, clientOrderId: string): boolean {
    const row = this.store.get(accountId, clientOrderId);
    if (row && row.expires_at > this.clock.now()) this.restore(row);
    else if (row) this.store.remove(accountId, clientOrderId); // expired, not swept yet
    return row !== undefined;
  }

  /**
   * A broker booking in our database (claimsAtomically): the claim (`send`, its 'sent' row) runs
   * inside the transaction that books the order: one commit, and a crash leaves both or neither
   * (neither: never executed, the simulator died with us). A failure after the claim is `lost`,
   * kept in memory (its row may have gone with a failed commit) so a retry answers 409.
   */
  private sendAtomically(rec: Rec, prep: Prepared, lease: Lease): Promise<Outcome> {
    const c = rec.actor.getSnapshot().context;
    const requestId = brokerRequestId(c.accountId, c.clientOrderId, c.expiresAt);
    rec.busy = true;
    const claim = new RecordClaim(this.store, rec.actor, c);
    // Settled by `outcome`, or by halt() while the booking is awaited: both run on this thread
    // before the booking's continuation goes on, so a held value serves where a promise cost ~0.4 KB.
    const held = new HeldOutcome();
    rec.reply = held;
    // execute(), written out as continuations (no async function an order): the lease is released
    // once the send, and any lookup after a lost reply, are over.
    let sent: Promise<TradeResult>;
    try {
      sent = prep.run(lease.conn, { requestId, claim });
    } catch (err) {
      sent = Promise.reject(err);
    }
    const booked = (result: TradeResult): Outcome => {
      lease.release();
      return this.booked(rec, held, claim, result);
    };
    return sent.then(booked, (err: unknown) =>
      sendFailed(err, lease, requestId).then(booked, (e: unknown) => {
        lease.release();
        return this.notBooked(rec, held, claim, e);
      }),
    );
  }

  /** The atomic send's result: the claim's outcome (settled in the booking's transaction, or now). */
  private booked(rec: Rec, held: HeldOutcome, claim: RecordClaim, result: TradeResult): Outcome {
    try {
      const s = rec.actor.getSnapshot();
      if (s.matches('result')) {
        // Settled in the booking's transaction: answered now, with the stored bytes.
        rec.reply = undefined;
        this.idle(rec);
        this.evict(rec);
        return { type: 'done', result: s.context.result! };
      }
      this.outcome(rec, { type: 'done', result: answer(result) });
    } catch (err) {
      return this.notBooked(rec, held, claim, err);
    }
    return held.take();
  }

  /** The atomic send failed: unclaimed (nothing recorded or executed), not sent, or lost. */
  private notBooked(rec: Rec, held: HeldOutcome, claim: RecordClaim, err: unknown): Outcome {
    if (!claim.checked) {
      rec.reply = undefined;
      throw new UnclaimedError(err);
    }
    const ev: Outcome = err instanceof NotSentError ? { type: 'failed' } : { type: 'lost' };
    if (ev.type === 'lost') {
      rec.pinned = true;
      // The claim's own write failed, after the trade ran in memory: an uncertain record, in memory only.
      const c = claim.context;
      if (!rec.actor.getSnapshot().matches('sent')) this.start({ account_id: c.accountId, client_order_id: c.clientOrderId, params_hash: c.paramsHash, phase: 'uncertain', expires_at: c.expiresAt }).pinned = true;
    }
    this.outcome(rec, ev, err);
    return held.take();
  }

  stop(): void {
    clearInterval(this.sweep);
    // Outcomes already answered are written first (a graceful stop loses nothing).
    this.flush();
    for (const rec of this.records.values()) this.halt(rec);
    this.records.clear();
  }

  /** Cluster mode: these accounts went to another node; their records here stop (the cluster's
   *  ledger in PostgreSQL is what the next owner answers retries from). */
  release(accountIds: ReadonlySet<string>): void {
    this.flush();
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
