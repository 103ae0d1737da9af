// Customers, keys and seats. Key rows hold only a SHA-256 of the secret part: keys carry 256 bits
// of randomness, so a fast hash is enough (no password-stretching needed) and lookups stay cheap.
import type { Db } from './db.js';

export interface CustomerRow { id: string; name: string; created_at: number }
export interface KeyRow {
  id: string; customer_id: string; kind: 'management' | 'api'; hash: string; label: string;
  read_only: number; account_scoped: number; seat_id: string | null; created_at: number; revoked_at: number | null;
}
export interface SeatRow {
  id: string; customer_id: string; private_hosting: number; region: string | null; created_at: number; removed_at: number | null;
}
export interface SeatStateRow { seat_id: string; status: string; ready_at: number; updated_at: number }

export class TenancyStore {
  private readonly q;
  constructor(db: Db) {
    this.q = {
      insertCustomer: db.prepare('INSERT INTO customers (id, name, created_at) VALUES (?, ?, ?)'),
      customerByName: db.prepare<[string], CustomerRow>('SELECT * FROM customers WHERE name = ? ORDER BY created_at LIMIT 1'),
      insertKey: db.prepare(`INSERT INTO keys (id, customer_id, kind, hash, label, read_only, account_scoped, seat_id, created_at)
        VALUES (@id, @customer_id, @kind, @hash, @label, @read_only, @account_scoped, @seat_id, @created_at)`),
      keyById: db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE id = ?'),
      revokeKey: db.prepare('UPDATE keys SET revoked_at = ? WHERE id = ? AND customer_id = ? AND revoked_at IS NULL'),
      keysOf: db.prepare<[string], KeyRow>('SELECT * FROM keys WHERE customer_id = ? ORDER BY created_at'),
      insertSeat: db.prepare(`INSERT INTO seats (id, customer_id, private_hosting, region, created_at)
        VALUES (@id, @customer_id, @private_hosting, @region, @created_at)`),
      seatById: db.prepare<[string], SeatRow>('SELECT * FROM seats WHERE id = ? AND removed_at IS NULL'),
      seatsOf: db.prepare<[string], SeatRow>('SELECT * FROM seats WHERE customer_id = ? AND removed_at IS NULL ORDER BY created_at'),
      upsertSeatState: db.prepare(`INSERT INTO seat_state (seat_id, status, ready_at, updated_at) VALUES (@seat_id, @status, @ready_at, @updated_at)
        ON CONFLICT(seat_id) DO UPDATE SET status = excluded.status, ready_at = excluded.ready_at, updated_at = excluded.updated_at`),
      seatState: db.prepare<[string], SeatStateRow>('SELECT * FROM seat_state WHERE seat_id = ?'),
      allSeatStates: db.prepare<[], SeatStateRow>('SELECT * FROM seat_state'),
    };
  }

  createCustomer(id: string, name: string, now: number): CustomerRow {
    this.q.insertCustomer.run(id, name, now);
    return { id, name, created_at: now };
  }
  customerByName(name: string): CustomerRow | undefined {
    return this.q.customerByName.get(name);
  }
  insertKey(row: Omit<KeyRow, 'revoked_at'>): void {
    this.q.insertKey.run(row);
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
  insertSeat(row: Omit<SeatRow, 'removed_at'>): void {
    this.q.insertSeat.run(row);
  }
  seatById(id: string): SeatRow | undefined {
    return this.q.seatById.get(id);
  }
  seatsOf(customerId: string): SeatRow[] {
    return this.q.seatsOf.all(customerId);
  }
  upsertSeatState(row: SeatStateRow): void {
    this.q.upsertSeatState.run(row);
  }
  seatState(id: string): SeatStateRow | undefined {
    return this.q.seatState.get(id);
  }
  allSeatStates(): SeatStateRow[] {
    return this.q.allSeatStates.all();
  }
}
