// Idempotency records of trade requests (SPEC §3, §8), written only by the shard that owns the
// account. The 'sent' row is committed BEFORE the request goes to the broker: after a crash a
// 'sent' row without a result means "may have executed" and is never sent again.
import type { Db } from './db.js';
import { systemClock, type Clock } from '../util/clock.js';
import { ClaimedIds } from './claimedIds.js';
import { RecordKeys, type RecordKeysOptions } from './idempotencyKeys.js';

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

/** A record claimed inside `writeOnce`, written when it ends; `taken`: its key had a record already. */
interface HeldRow extends IdemRow {
  taken: boolean;
}

export type IdempotencyStoreOptions = RecordKeysOptions;

export class IdempotencyStore {
  private readonly q;
  private readonly tx: (f: () => void) => void;
  /** Inside `writeOnce`: the records claimed there, not written yet. */
  private held: HeldRow[] | null = null;
  private readonly heldRows: HeldRow[] = [];
  /** Ids that may have a record (claimedIds.ts), complete for the accounts in `known`. */
  private readonly claimed: ClaimedIds;
  /** Accounts whose records from before this store (an earlier process) are in `claimed`. */
  private readonly known = new Set<string>();
  /** Where a record is found by its key: the keys moved, or the tail (idempotencyKeys.ts). */
  private readonly keys: RecordKeys;
  /** Only the shard that owns an account writes its records, and finds them by key: all of them go
   *  through this store (the tail of records it wrote is in its memory until their keys are moved). */
  constructor(db: Db, clock: Clock = systemClock, options: IdempotencyStoreOptions = {}) {
    this.claimed = new ClaimedIds(clock);
    this.keys = new RecordKeys(db, options);
    // IMMEDIATE: a removal reads the record's key before it deletes, and a deferred transaction
    // that read was answered SQLITE_BUSY at once (no busy wait) when another connection of the file
    // wrote meanwhile (another shard's login taking its id block): a 500 on a crashed order's retry.
    this.tx = db.transaction((f: () => void) => f()).immediate;
    const byId = 'id = ? AND account_id = ? AND client_order_id = ?';
    this.q = {
      insert: db.prepare(`INSERT INTO idempotency (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
      getById: db.prepare<[number, string, string], IdemRow>(`SELECT ${COLUMNS} FROM idempotency WHERE ${byId}`),
      setResult: db.prepare(`UPDATE idempotency SET phase = 'result', status = ?, result_json = ? WHERE ${byId}`),
      setUncertain: db.prepare(`UPDATE idempotency SET phase = 'uncertain' WHERE ${byId} AND phase = 'sent'`),
      remove: db.prepare(`DELETE FROM idempotency WHERE ${byId}`),
      // Keys first: the expired records' keys, then the records (only moved records have keys).
      purgeKeys: db.prepare(`DELETE FROM idempotency_keys WHERE (account_id, client_order_id, record) IN
        (SELECT account_id, client_order_id, id FROM idempotency WHERE expires_at <= ?)`),
      purge: db.prepare('DELETE FROM idempotency WHERE expires_at <= ?'),
      unsettled: db.prepare<[number], IdemRow>(`SELECT ${COLUMNS} FROM idempotency WHERE phase = 'sent' AND expires_at > ?`),
    };
    this.keys.load((accountId, id, expiresAt) => this.claimed.add(accountId, id, expiresAt));
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
      for (const r of held) if (r.taken) throw new Error(`idempotency record ${r.client_order_id} already exists`);
      for (const r of held) this.write(r);
    } finally {
      held.length = 0;
    }
  }

  private write(r: IdemRow): void {
    const id = this.q.insert.run(r.account_id, r.client_order_id, r.params_hash, r.phase, r.status, r.result_json, r.created_at, r.expires_at).lastInsertRowid;
    this.keys.wrote(r.account_id, r.client_order_id, Number(id));
  }

  private heldRow(accountId: string, id: string): HeldRow | undefined {
    const held = this.held;
    if (held) for (const r of held) if (r.client_order_id === id && r.account_id === accountId) return r;
    return undefined;
  }

  /** Durably claims the id. False when a record already exists (the caller must read it). */
  insertSent(accountId: string, id: string, paramsHash: string, now: number, expiresAt: number): boolean {
    // The key's uniqueness is this check's (no index refuses a second row): before the id is added.
    const taken = (this.held !== null && this.heldRow(accountId, id) !== undefined) || this.exists(accountId, id);
    this.claimed.add(accountId, id, expiresAt);
    const row: HeldRow = { account_id: accountId, client_order_id: id, params_hash: paramsHash, phase: 'sent', status: null, result_json: null, created_at: now, expires_at: expiresAt, taken };
    if (this.held) {
      this.held.push(row);
      return true;
    }
    if (taken) return false;
    this.write(row);
    return true;
  }
  /** Whether a record holds the id: read from its key, unless no record can (ClaimedIds). */
  exists(accountId: string, id: string): boolean {
    if (!this.known.has(accountId)) {
      // Once per account: the records an earlier process wrote (their tail was added at the start).
      for (const r of this.keys.ofAccount(accountId)) this.claimed.add(accountId, r.client_order_id, r.expires_at);
      this.known.add(accountId);
    }
    if (!this.claimed.mayHold(accountId, id)) return false;
    return this.keys.recordOf(accountId, id) !== undefined;
  }
  get(accountId: string, id: string): IdemRow | undefined {
    const r = this.keys.recordOf(accountId, id);
    return r === undefined ? undefined : this.q.getById.get(r, accountId, id);
  }
  setResult(accountId: string, id: string, status: number, resultJson: string): void {
    const h = this.heldRow(accountId, id);
    if (h) Object.assign(h, { phase: 'result', status, result_json: resultJson });
    else this.byKey(accountId, id, (r) => this.q.setResult.run(status, resultJson, r, accountId, id).changes);
  }
  setUncertain(accountId: string, id: string): void {
    const h = this.heldRow(accountId, id);
    if (h) {
      if (h.phase === 'sent') h.phase = 'uncertain';
    } else this.byKey(accountId, id, (r) => this.q.setUncertain.run(r, accountId, id).changes);
  }
  /** `run` on the key's record by its id (which `run` checks is the key's): the tail's, and when that
   *  changed nothing, the moved key's. */
  private byKey(accountId: string, id: string, run: (record: number) => number): void {
    const t = this.keys.inTail(accountId, id);
    if (t !== undefined && run(t) > 0) return;
    const k = this.keys.keyed(accountId, id);
    if (k !== undefined) run(k);
  }
  /** Only for a request that certainly never reached the broker. */
  remove(accountId: string, id: string): void {
    const h = this.heldRow(accountId, id);
    if (h) {
      this.held!.splice(this.held!.indexOf(h), 1);
      return;
    }
    this.tx(() => {
      const r = this.keys.recordOf(accountId, id);
      if (r === undefined) return;
      this.keys.forget(accountId, id);
      this.q.remove.run(r, accountId, id);
      this.keys.deleted();
    });
  }
  purgeExpired(now: number): number {
    let n = 0;
    this.tx(() => {
      this.q.purgeKeys.run(now);
      n = this.q.purge.run(now).changes;
      if (n > 0) this.keys.deleted();
    });
    return n;
  }
  /** Records whose outcome was never written (the process stopped while their order was out). */
  unsettled(now: number): IdemRow[] {
    return this.q.unsettled.all(now);
  }
  /** Moves the keys of the records written since the last move into the keyed table now (the
   *  store does it by itself every MOVE_MS or MOVE_ROWS records). Returns how many. */
  moveKeys(): number {
    return this.keys.move();
  }
  /** A graceful stop: the keys moved, no move armed any more. */
  stop(): void {
    this.keys.stop();
  }
}
