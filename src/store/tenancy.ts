// Customers, keys and seats. Key rows hold only a SHA-256 of the secret part: keys carry 256 bits
// of randomness, so a fast hash is enough (no password-stretching needed) and lookups stay cheap.
import type { Db } from './db.js';

export interface CustomerRow { id: string; name: string; created_at: number }
export interface KeyRow {
  id: string; customer_id: string; kind: 'management' | 'api'; hash: string; label: string;
  read_only: number; account_scoped: number; seat_id: string | null; created_at: number; revoked_at: number | null;
  last_used_at: number | null;
  /** Per-key rate-limit overrides; NULL: the configured default (KEY_REQUESTS_PER_SEC, KEY_ORDERS_PER_SEC). */
  requests_per_sec: number | null; orders_per_sec: number | null;
  /** The key that replaced this one (POST /v1/keys/{id}/replace). */
  replaced_by: string | null;
}
/** What a new key row needs; the rest starts NULL. */
export type NewKeyRow = Omit<KeyRow, 'revoked_at' | 'last_used_at' | 'requests_per_sec' | 'orders_per_sec' | 'replaced_by'>
  & Partial<Pick<KeyRow, 'requests_per_sec' | 'orders_per_sec'>>;
export interface SeatRow {
  id: string; customer_id: string; private_hosting: number; region: string | null; created_at: number; removed_at: number | null;
}
export interface SeatStateRow { seat_id: string; status: string; ready_at: number; updated_at: number }

export class TenancyStore {
  private readonly q;
  constructor(private readonly db: Db) {
    this.q = {
      insertCustomer: db.prepare('INSERT INTO customers (id, name, created_at) VALUES (?, ?, ?)'),
      customerByName: db.prepare<[string], CustomerRow>('SELECT * FROM customers WHERE name = ? ORDER BY created_at LIMIT 1'),
      insertKey: db.prepare(`INSERT INTO keys (id, customer_id, kind, hash, label, read_only, account_scoped, seat_id, created_at, requests_per_sec, orders_per_sec)
        VALUES (@id, @customer_id, @kind, @hash, @label, @read_only, @account_scoped, @seat_id, @created_at, @requests_per_sec, @orders_per_sec)`),
      markReplaced: db.prepare('UPDATE keys SET replaced_by = ? WHERE id = ?'),
      keysOfSeat: db.prepare<[string, string], KeyRow>('SELECT * FROM keys WHERE customer_id = ? AND seat_id = ? ORDER BY created_at'),
      touchKey: db.prepare('UPDATE keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)'),
      setLimits: db.prepare('UPDATE keys SET requests_per_sec = ?, orders_per_sec = ? WHERE id = ? AND customer_id = ?'),
      removeSeat: db.prepare('UPDATE seats SET removed_at = ? WHERE id = ? AND customer_id = ? AND removed_at IS NULL'),
      liveKeysOfSeat: db.prepare<[string], { id: string }>('SELECT id FROM keys WHERE seat_id = ? AND account_scoped = 1 AND revoked_at IS NULL'),
      keyById: db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE id = ?'),
      revokeKey: db.prepare('UPDATE keys SET revoked_at = ? WHERE id = ? AND customer_id = ? AND revoked_at IS NULL'),
      keysOf: db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE customer_id = ? ORDER BY created_at'),
      insertSeat: db.prepare(`INSERT INTO seats (id, customer_id, private_hosting, region, created_at)
        VALUES (@id, @customer_id, @private_hosting, @region, @created_at)`),
      seatById: db.prepare<[string], SeatRow>('SELECT * FROM seats WHERE id = ? AND removed_at IS NULL'),
      seatsOf: db.prepare<[string], SeatRow>('SELECT * FROM seats WHERE customer_id = ? AND removed_at IS NULL ORDER BY created_at'),
      liveSeatIds: db.prepare<[], string>('SELECT id FROM seats WHERE removed_at IS NULL').pluck(),
      upsertSeatState: db.prepare(`INSERT INTO seat_state (seat_id, status, ready_at, updated_at) VALUES (@seat_id, @status, @ready_at, @updated_at)
        ON CONFLICT(seat_id) DO UPDATE SET status = excluded.status, ready_at = excluded.ready_at, updated_at = excluded.updated_at`),
      seatState: db.prepare<[string], SeatStateRow>('SELECT * FROM seat_state WHERE seat_id = ?'),
      // Removed seats' actors are not started again after a restart.
      buildingSeatStates: db.prepare<[], SeatStateRow>(`SELECT st.* FROM seat_state st JOIN seats s ON s.id = st.seat_id
        WHERE st.status <> 'ACTIVE' AND s.removed_at IS NULL`),
    };
  }

  createCustomer(id: string, name: string, now: number): CustomerRow {
    this.q.insertCustomer.run(id, name, now);
    return { id, name, created_at: now };
  }
  customerByName(name: string): CustomerRow | undefined {
    return this.q.customerByName.get(name);
  }
  insertKey(row: NewKeyRow): void {
    this.q.insertKey.run({ requests_per_sec: null, orders_per_sec: null, ...row });
  }
  keyById(id: string): KeyRow | undefined {
    return this.q.keyById.get(id);
  }
  /** @returns whether a live key of that customer was revoked */
  revokeKey(id: string, customerId: string, now: number): boolean {
    return this.q.revokeKey.run(now, id, customerId).changes === 1;
  }
  keysOf(customerId: string): KeyRow[] {
    return this.q.keysOf.all(customerId);
  }
  keysOfSeat(customerId: string, seatId: string): KeyRow[] {
    return this.q.keysOfSeat.all(customerId, seatId);
  }
  /**
   * Revokes a live key of the customer and stores its successor, in one transaction: there is no
   * moment with both keys working, nor one with neither.
   * @returns false (and nothing written) when the old key was not live
   */
  replaceKey(oldId: string, customerId: string, successor: NewKeyRow, now: number): boolean {
    return this.db.transaction(() => {
      if (!this.revokeKey(oldId, customerId, now)) return false;
      this.insertKey(successor);
      this.q.markReplaced.run(successor.id, oldId);
      return true;
    })();
  }
  /** Writes a batch of last-used times (one transaction); a time never moves backwards. */
  touchKeys(times: Iterable<[string, number]>): void {
    this.db.transaction(() => {
      for (const [id, at] of times) this.q.touchKey.run(at, id, at);
    })();
  }
  /** @returns whether the key (of that customer) exists */
  setKeyLimits(id: string, customerId: string, limits: { requestsPerSec: number | null; ordersPerSec: number | null }): boolean {
    return this.q.setLimits.run(limits.requestsPerSec, limits.ordersPerSec, id, customerId).changes === 1;
  }
  /**
   * Marks a seat removed and revokes the keys scoped to it, in one transaction. Its orders,
   * bindings and audit rows stay (history). @returns the revoked key ids, or undefined when the
   * seat was not a live seat of the customer
   */
  removeSeat(id: string, customerId: string, now: number): string[] | undefined {
    const revoked = this.db.transaction(() => {
      if (this.q.removeSeat.run(now, id, customerId).changes !== 1) return undefined;
      const keys = this.q.liveKeysOfSeat.all(id).map((r) => r.id);
      for (const k of keys) this.revokeKey(k, customerId, now);
      return keys;
    })();
    if (revoked) this.seatRemoved(id);
    return revoked;
  }
  /** A seat removed elsewhere (cluster mode: another node, or PostgreSQL first): the caches forget it. */
  seatRemoved(id: string): void {
    this.seatChanges++;
    for (const l of this.seatRemovedListeners) l(id);
  }
  private readonly seatRemovedListeners: Array<(seatId: string) => void> = [];
  /** Caches of seat rows (this thread's) drop a removed seat at once instead of at their TTL. */
  onSeatRemoved(listener: (seatId: string) => void): void {
    this.seatRemovedListeners.push(listener);
  }
  insertSeat(row: Omit<SeatRow, 'removed_at'>): void {
    this.q.insertSeat.run(row);
    this.seatChanges++;
  }
  /** Seats added or removed through this store since it opened: what reads every live seat
   *  (liveSeatIds) need not read them again while it stays the same. */
  seatChanges = 0;
  seatById(id: string): SeatRow | undefined {
    return this.q.seatById.get(id);
  }
  seatsOf(customerId: string): SeatRow[] {
    return this.q.seatsOf.all(customerId);
  }
  /** Every customer's seats not removed: the accounts the shards run (/v1/status, per shard,
   *  read again only after seatChanges moved: a scan of every seat). */
  liveSeatIds(): string[] {
    return this.q.liveSeatIds.all();
  }
  upsertSeatState(row: SeatStateRow): void {
    this.q.upsertSeatState.run(row);
  }
  seatState(id: string): SeatStateRow | undefined {
    return this.q.seatState.get(id);
  }
  /** Seats not ACTIVE yet (a private seat's server being prepared): the ones with an actor to restore. */
  buildingSeatStates(): SeatStateRow[] {
    return this.q.buildingSeatStates.all();
  }
}
