// Tenancy in PostgreSQL, the cluster's record of it: customers, keys (hashes only), seats, seat
// state, account bindings (sealed passwords) and the audit log. Writes go here first, with the same
// operations and rules as the SQLite stores (src/store/tenancy.ts, accounts.ts, audit.ts); each
// node's SQLite follows as a mirror (tenancyMirror.ts) for synchronous reads. An audited write takes
// its audit row (made from the outcome) and inserts it in the change's own transaction, with a fresh
// reference: the change and its row commit together or not at all.
import { randomUUID } from 'node:crypto';
import { DEFAULT_CUSTOMER } from '../auth/bootstrap.js';
import { generateKey, hashSecret } from '../auth/keys.js';
import type { BindingRow } from '../store/accounts.js';
import type { AuditOf, NewAuditRow } from '../store/audit.js';
import type { NewKeyRow, SeatRow, SeatStateRow } from '../store/tenancy.js';
import type { LoginHolder } from '../store/tenancyWrites.js';
import { withTransaction, type PgPool, type Queryable } from './pgPool.js';

// Any fixed number: the key of the advisory lock under which nodes starting together bootstrap once.
const BOOTSTRAP_LOCK = 0x7461_6762;
/** How long a login stays held for a re-bind: longer than any bind takes (a forwarded call's bound is 31 s). */
export const LOGIN_CLAIM_MS = 120_000;

export class PgTenancy {
  constructor(private readonly pool: PgPool) {}

  /**
   * The cluster's operator customer (one for all nodes) and, unless a management key is configured,
   * its first management key, made once whichever nodes start together. Run before the node's
   * first mirror pass, so the SQLite bootstrap (src/auth/bootstrap.ts) then finds both and makes
   * neither. `createdKey`: this call made the key; the caller shows it once and keeps it as the
   * SQLite bootstrap does (DATA_DIR/bootstrap.json).
   */
  bootstrapOperator(managementKeyConfigured: boolean, now: number): Promise<{ customerId: string; createdKey?: string }> {
    return withTransaction(this.pool, async (c) => {
      await c.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
      const found = await c.query<{ id: string }>('SELECT id FROM customers WHERE name = $1 ORDER BY created_at LIMIT 1', [DEFAULT_CUSTOMER]);
      let customerId = found.rows[0]?.id;
      if (!customerId) {
        customerId = randomUUID();
        await c.query('INSERT INTO customers (id, name, created_at) VALUES ($1, $2, $3)', [customerId, DEFAULT_CUSTOMER, now]);
      }
      if (managementKeyConfigured) return { customerId };
      const live = await c.query(`SELECT 1 FROM keys WHERE customer_id = $1 AND kind = 'management' AND revoked_at IS NULL LIMIT 1`, [customerId]);
      if (live.rowCount !== 0) return { customerId };
      const k = generateKey('management');
      await this.writeKey(c, {
        id: k.id, customer_id: customerId, kind: 'management', hash: hashSecret(k.secret), label: 'bootstrap',
        read_only: 0, account_scoped: 0, seat_id: null, created_at: now,
      });
      return { customerId, createdKey: k.value };
    });
  }

  async createCustomer(id: string, name: string, now: number): Promise<void> {
    await this.pool.query('INSERT INTO customers (id, name, created_at) VALUES ($1, $2, $3)', [id, name, now]);
  }

  /** `change` in one transaction with the audit row `audit` makes of its outcome (none without it). */
  private audited<T>(change: (c: Queryable) => Promise<T>, audit?: AuditOf<T>): Promise<T> {
    return withTransaction(this.pool, async (c) => {
      const out = await change(c);
      const row = audit?.(out);
      if (row) await this.addAudit(row, randomUUID(), c);
      return out;
    });
  }

  insertKey(row: NewKeyRow, audit?: AuditOf<void>): Promise<void> {
    return this.audited((c) => this.writeKey(c, row), audit);
  }

  private async writeKey(q: Queryable, row: NewKeyRow): Promise<void> {
    await q.query(
      `INSERT INTO keys (id, customer_id, kind, hash, label, read_only, account_scoped, seat_id, created_at, requests_per_sec, orders_per_sec)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
      [row.id, row.customer_id, row.kind, row.hash, row.label, row.read_only !== 0, row.account_scoped !== 0, row.seat_id, row.created_at,
        row.requests_per_sec ?? null, row.orders_per_sec ?? null],
    );
  }

  /** @returns whether a live key of that customer was revoked */
  revokeKey(id: string, customerId: string, now: number, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.audited((c) => this.revokeIn(c, id, customerId, now), audit);
  }

  private async revokeIn(q: Queryable, id: string, customerId: string, now: number): Promise<boolean> {
    const r = await q.query('UPDATE keys SET revoked_at = $1 WHERE id = $2 AND customer_id = $3 AND revoked_at IS NULL', [now, id, customerId]);
    return r.rowCount === 1;
  }

  /** Revokes a live key and stores its successor in one transaction (never both working, never neither).
   *  @returns false (nothing written) when the old key was not live */
  replaceKey(oldId: string, customerId: string, successor: NewKeyRow, now: number, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.audited(async (c) => {
      if (!(await this.revokeIn(c, oldId, customerId, now))) return false;
      await this.writeKey(c, successor);
      await c.query('UPDATE keys SET replaced_by = $1 WHERE id = $2', [successor.id, oldId]);
      return true;
    }, audit);
  }

  /** Last-used times of many keys in one statement; a time never moves backwards. */
  async touchKeys(times: Iterable<[string, number]>): Promise<void> {
    const list = [...times];
    if (list.length === 0) return;
    await this.pool.query(
      `UPDATE keys k SET last_used_at = t.at
       FROM (SELECT id, max(at) AS at FROM unnest($1::text[], $2::bigint[]) AS u(id, at) GROUP BY id) AS t
       WHERE k.id = t.id AND (k.last_used_at IS NULL OR k.last_used_at < t.at)`,
      [list.map(([id]) => id), list.map(([, at]) => at)],
    );
  }

  /** @returns whether the key (of that customer) exists */
  setKeyLimits(id: string, customerId: string, limits: { requestsPerSec: number | null; ordersPerSec: number | null }, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.audited(async (c) => {
      const r = await c.query('UPDATE keys SET requests_per_sec = $1, orders_per_sec = $2 WHERE id = $3 AND customer_id = $4',
        [limits.requestsPerSec, limits.ordersPerSec, id, customerId]);
      return r.rowCount === 1;
    }, audit);
  }

  async insertSeat(row: Omit<SeatRow, 'removed_at'>, q: Queryable = this.pool): Promise<void> {
    await q.query('INSERT INTO seats (id, customer_id, private_hosting, region, created_at) VALUES ($1, $2, $3, $4, $5)',
      [row.id, row.customer_id, row.private_hosting !== 0, row.region, row.created_at]);
  }

  /** A new seat with its first state and, for a new account, its binding, in one transaction: one
   *  commit makes the whole seat, so a seat never exists without the state every node's seat timer
   *  reads, nor a new account without its binding.
   *  @returns false when the binding's login is taken (upsertBinding's check; nothing written) */
  createSeat(row: Omit<SeatRow, 'removed_at'>, state: SeatStateRow, binding?: BindingRow, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.audited(async (c) => {
      if (binding && await this.loginTaken(c, binding.server, binding.login, binding.seat_id)) return false;
      await this.insertSeat(row, c);
      await this.upsertSeatState(state, c);
      if (binding) await this.writeBinding(c, binding);
      return true;
    }, audit);
  }

  /** Marks a live seat removed and revokes the keys scoped to it, in one transaction.
   *  @returns the revoked key ids, or undefined when it was not a live seat of the customer */
  removeSeat(id: string, customerId: string, now: number, audit?: AuditOf<string[] | undefined>): Promise<string[] | undefined> {
    return this.audited(async (c) => {
      const r = await c.query('UPDATE seats SET removed_at = $1 WHERE id = $2 AND customer_id = $3 AND removed_at IS NULL', [now, id, customerId]);
      if (r.rowCount !== 1) return undefined;
      const keys = await c.query<{ id: string }>(
        `UPDATE keys SET revoked_at = $1 WHERE seat_id = $2 AND customer_id = $3 AND account_scoped AND revoked_at IS NULL RETURNING id`,
        [now, id, customerId]);
      return keys.rows.map((k) => k.id);
    }, audit);
  }

  async upsertSeatState(row: SeatStateRow, q: Queryable = this.pool): Promise<void> {
    await q.query(
      `INSERT INTO seat_state (seat_id, status, ready_at, updated_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (seat_id) DO UPDATE SET status = excluded.status, ready_at = excluded.ready_at, updated_at = excluded.updated_at`,
      [row.seat_id, row.status, row.ready_at, row.updated_at]);
  }

  /**
   * Writes an account's binding unless its login is bound to another live account, or held for one
   * being re-bound to it (one account per broker login, across nodes): the check and the write in
   * one transaction under an advisory lock on the login, so two nodes binding it at once serialise
   * and the second finds the first.
   * @returns false when the login is bound elsewhere (nothing written)
   */
  upsertBinding(row: BindingRow): Promise<boolean> {
    return withTransaction(this.pool, async (c) => {
      if (await this.loginTaken(c, row.server, row.login, row.seat_id)) return false;
      await this.writeBinding(c, row);
      return true;
    });
  }

  private async writeBinding(c: Queryable, row: BindingRow): Promise<void> {
    await c.query(
      `INSERT INTO account_bindings (seat_id, customer_id, platform, server, login, password_enc, build, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (seat_id) DO UPDATE SET platform = excluded.platform, server = excluded.server, login = excluded.login,
         password_enc = excluded.password_enc, build = excluded.build, updated_at = excluded.updated_at`,
      [row.seat_id, row.customer_id, row.platform, row.server, row.login, row.password_enc, row.build, row.created_at, row.updated_at]);
  }

  /**
   * Holds a broker login for an existing account about to be re-bound to it, unless another live
   * account has it bound or held: checked and written under the login's advisory lock, before the
   * account's owner binds it, so of two accounts re-bound to one login at once exactly one gets it
   * and the other's shard is never asked. The owner then copies the new binding here itself
   * (BindingRecords); `releaseLogin` ends the hold. A hold outlives no bind: it expires after `ms`
   * by PostgreSQL's clock (a node that died mid-bind).
   * @returns false when the login is bound or held for another account (nothing written)
   */
  claimLogin(seatId: string, server: string, login: string, ms = LOGIN_CLAIM_MS): Promise<boolean> {
    return withTransaction(this.pool, async (c) => {
      if (await this.loginTaken(c, server, login, seatId)) return false;
      await c.query(
        `INSERT INTO login_claims (server, login, seat_id, expires_at) VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond')
         ON CONFLICT (server, login) DO UPDATE SET seat_id = excluded.seat_id, expires_at = excluded.expires_at`,
        [server, login, seatId, ms]);
      return true;
    });
  }

  /** Ends the account's hold on a login (its re-bind answered, either way). */
  async releaseLogin(seatId: string, server: string, login: string): Promise<void> {
    await this.pool.query('DELETE FROM login_claims WHERE server = $1 AND login = $2 AND seat_id = $3', [server, login, seatId]);
  }

  /** Takes the login's advisory lock (until the transaction ends), then: is it bound to, or held
   *  for, a live account other than `seatId`? */
  private async loginTaken(c: Queryable, server: string, login: string, seatId: string): Promise<boolean> {
    // The key: a hash of the login (a collision only serialises two logins' bindings).
    await c.query("SELECT pg_advisory_xact_lock(hashtextextended(length($1) || ':' || $1 || $2, 20))", [server, login]);
    return (await this.loginHolder(server, login, seatId, c)) !== undefined;
  }

  /** Who has the login bound to a live account other than `seatId`, else held for one: what
   *  `loginTaken` finds, also read after it refused a login (the refusal's password check needs the
   *  account: loginInUse.ts). A hold counts whatever its seat (its customer: null without one). */
  async loginHolder(server: string, login: string, seatId: string, q: Queryable = this.pool): Promise<LoginHolder | undefined> {
    const r = await q.query<LoginHolder>(
      `SELECT * FROM (SELECT b.seat_id, b.customer_id, b.platform, b.password_enc FROM account_bindings b JOIN seats s ON s.id = b.seat_id
         WHERE s.removed_at IS NULL AND b.server = $1 AND b.login = $2 AND b.seat_id <> $3 ORDER BY b.created_at LIMIT 1) bound
       UNION ALL
       SELECT c.seat_id, s.customer_id, NULL, NULL FROM login_claims c LEFT JOIN seats s ON s.id = c.seat_id
         WHERE c.server = $1 AND c.login = $2 AND c.seat_id <> $3 AND c.expires_at > now()
       LIMIT 1`,
      [server, login, seatId]);
    const h = r.rows[0];
    return h && { seat_id: h.seat_id, customer_id: h.customer_id, ...(h.platform ? { platform: h.platform } : {}), ...(h.password_enc ? { password_enc: h.password_enc } : {}) };
  }

  async setBuild(seatId: string, build: number | null, now: number): Promise<void> {
    await this.pool.query('UPDATE account_bindings SET build = $1, updated_at = $2 WHERE seat_id = $3', [build, now, seatId]);
  }

  /** `ref`: the node's reference of the row (auditOutbox.ts); a row with a reference already written
   *  is not written again. @returns the new row's id (undefined: that reference was there) */
  async addAudit(row: NewAuditRow, ref?: string, q: Queryable = this.pool): Promise<number | undefined> {
    const r = await q.query<{ id: number }>(
      `INSERT INTO audit_log (customer_id, at, actor_key_id, action, target, detail_json, ref) VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (ref) WHERE ref IS NOT NULL DO NOTHING RETURNING id`,
      [row.customer_id, row.at, row.actor_key_id, row.action, row.target, row.detail_json, ref ?? null]);
    return r.rows[0]?.id;
  }

  /** Every account of the cluster: bound seats not removed. What each node's LeaseKeeper divides. */
  async liveAccountIds(): Promise<string[]> {
    const r = await this.pool.query<{ seat_id: string }>(
      'SELECT b.seat_id FROM account_bindings b JOIN seats s ON s.id = b.seat_id WHERE s.removed_at IS NULL ORDER BY b.seat_id');
    return r.rows.map((row) => row.seat_id);
  }
}
