// Account bindings: which broker login a seat is connected to. The password column holds only the
// AES-256-GCM sealed form (src/crypto/secretBox.ts); nothing here ever sees the plain password.
import type { Db } from './db.js';
import { onePer } from '../util/onePer.js';

export interface BindingRow {
  seat_id: string;
  customer_id: string;
  platform: 'P4' | 'P5';
  server: string;
  login: string;
  password_enc: string;
  build: number | null;
  created_at: number;
  updated_at: number;
}

export class AccountStore {
  /**
   * The connection's store, made once: the constructor prepares its eight statements (~70 µs of the
   * main thread), which each /ConnectEx paid three to four times (a creation ramp of 3,000 accounts
   * spent 200 ms preparing them, plus their garbage). The store holds nothing but its statements.
   */
  static readonly of: (db: Db) => AccountStore = onePer((db: Db) => new AccountStore(db));
  private readonly q;
  constructor(db: Db) {
    this.q = {
      upsert: db.prepare(`INSERT INTO account_bindings (seat_id, customer_id, platform, server, login, password_enc, build, created_at, updated_at)
        VALUES (@seat_id, @customer_id, @platform, @server, @login, @password_enc, @build, @created_at, @updated_at)
        ON CONFLICT(seat_id) DO UPDATE SET platform = excluded.platform, server = excluded.server, login = excluded.login,
          password_enc = excluded.password_enc, build = excluded.build, updated_at = excluded.updated_at`),
      get: db.prepare<[string], BindingRow>('SELECT * FROM account_bindings WHERE seat_id = ?'),
      // Bindings of seats that still exist (a binding is written before its seat row on /ConnectEx).
      live: db.prepare<[], BindingRow>(`SELECT b.* FROM account_bindings b JOIN seats s ON s.id = b.seat_id WHERE s.removed_at IS NULL`),
      // The same in pages by seat id (the primary key's order): a restart reads its accounts a page at a time.
      livePage: db.prepare<[string, number], BindingRow>(`SELECT b.* FROM account_bindings b JOIN seats s ON s.id = b.seat_id
        WHERE b.seat_id > ? AND s.removed_at IS NULL ORDER BY b.seat_id LIMIT ?`),
      removed: db.prepare<[string], { one: number }>('SELECT 1 AS one FROM seats WHERE id = ? AND removed_at IS NOT NULL'),
      setBuild: db.prepare('UPDATE account_bindings SET build = ?, updated_at = ? WHERE seat_id = ?'),
      boundTo: db.prepare<[string, string], BindingRow>(`SELECT b.* FROM account_bindings b JOIN seats s ON s.id = b.seat_id
        WHERE s.removed_at IS NULL AND b.server = ? AND b.login = ? ORDER BY b.created_at LIMIT 1`),
    };
  }

  upsert(row: BindingRow): void {
    this.q.upsert.run(row);
  }
  get(seatId: string): BindingRow | undefined {
    return this.q.get.get(seatId);
  }
  /** The binding of an account whose seat was not removed (a binding with no seat row yet counts:
   *  /ConnectEx writes the binding first). */
  getLive(seatId: string): BindingRow | undefined {
    const row = this.q.get.get(seatId);
    return row && !this.q.removed.get(seatId) ? row : undefined;
  }
  live(): BindingRow[] {
    return this.q.live.all();
  }
  /** Up to `limit` live bindings whose seat id sorts after `after` ('' for the first page), in seat id order. */
  livePage(after: string, limit: number): BindingRow[] {
    return this.q.livePage.all(after, limit);
  }
  /** The live account a broker login is bound to, if any. */
  boundTo(server: string, login: string): BindingRow | undefined {
    return this.q.boundTo.get(server, login);
  }
  setBuild(seatId: string, build: number | null, now: number): void {
    this.q.setBuild.run(build, now, seatId);
  }
}
