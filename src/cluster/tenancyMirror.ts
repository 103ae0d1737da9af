// Each node's SQLite as a mirror of the cluster's tenancy in PostgreSQL, so auth, seat and binding
// reads stay synchronous and local. A pass copies the rows written since the last one: every row
// carries the id of the transaction that last wrote it (migration 2), and a pass reads, in one
// snapshot, the rows stamped at or after the oldest transaction still running at the previous
// pass; a transaction that commits late is therefore never skipped (a row may be copied twice,
// which an upsert absorbs). Rows are never deleted in tenancy (removal and revocation are stamps),
// so upserts are the whole of it, with one exception: PostgreSQL restored from a backup older than
// some keys or seats no longer has them, and a mirror kept from before would go on accepting them.
// The first pass of each process (the restore procedure stops every node) reads every row, so it
// revokes the keys and removes the seats the mirror holds and PostgreSQL does not.
// A pass also tells the node what it changed that the node's caches may hold (`changed`): keys
// revoked (or otherwise changed for authentication), keys whose own limits changed, seats removed.
// So a node that missed a write's notice on NATS (at most once: a cut link, a restarted
// nats-server, a lost message) drops those caches at its next pass, every second, as it would
// have at the notice (docs/cluster.md, "Tenancy across nodes").
import { writeTransaction, type Db } from '../store/db.js';
import { LatestRuns } from '../util/latestRuns.js';
import { withTransaction, type PgPool } from './pgPool.js';

interface Table {
  name: string;
  key: string;
  columns: readonly string[];
  /** Booleans in PostgreSQL, 0/1 in SQLite. */
  flags?: readonly string[];
}

// Parents before children: the SQLite side enforces its foreign keys.
const TABLES: readonly Table[] = [
  { name: 'customers', key: 'id', columns: ['id', 'name', 'created_at'] },
  { name: 'seats', key: 'id', columns: ['id', 'customer_id', 'private_hosting', 'region', 'created_at', 'removed_at'], flags: ['private_hosting'] },
  { name: 'keys', key: 'id', flags: ['read_only', 'account_scoped'], columns: [
    'id', 'customer_id', 'kind', 'hash', 'label', 'read_only', 'account_scoped', 'seat_id', 'created_at', 'revoked_at',
    'last_used_at', 'requests_per_sec', 'orders_per_sec', 'replaced_by'] },
  { name: 'seat_state', key: 'seat_id', columns: ['seat_id', 'status', 'ready_at', 'updated_at'] },
  { name: 'account_bindings', key: 'seat_id', columns: [
    'seat_id', 'customer_id', 'platform', 'server', 'login', 'password_enc', 'build', 'created_at', 'updated_at'] },
  { name: 'audit_log', key: 'id', columns: ['id', 'customer_id', 'at', 'actor_key_id', 'action', 'target', 'detail_json'] },
];

/** What a pass changed that a node's caches may hold (the fields of a TenancyNotice it stands for). */
export interface MirrorChanges {
  /** Keys revoked, or changed in what authenticates them (their auth entries, buckets and sockets go). */
  keys: string[];
  /** Keys whose own rate limits changed (their buckets go). */
  limits: string[];
  /** Seats removed (their cached rows and sockets go). */
  accounts: string[];
}

/** A key's columns that a cached principal was made of (authenticator.ts): any of them changed drops it. */
const AUTH_COLUMNS = ['revoked_at', 'hash', 'kind', 'customer_id', 'read_only', 'account_scoped', 'seat_id'] as const;
const LIMIT_COLUMNS = ['requests_per_sec', 'orders_per_sec'] as const;
type KeyBefore = Record<(typeof AUTH_COLUMNS)[number] | (typeof LIMIT_COLUMNS)[number], unknown>;

/** Adds to `out` what copying `row` over `before` changes for the caches (nothing for a new key:
 *  an unknown key is never cached). */
function keyChange(before: KeyBefore | undefined, row: Record<string, unknown>, out: MirrorChanges): void {
  if (!before) return;
  const id = row.id as string;
  if (AUTH_COLUMNS.some((c) => before[c] !== row[c])) out.keys.push(id);
  else if (LIMIT_COLUMNS.some((c) => before[c] !== row[c])) out.limits.push(id);
}

function upsertSql(t: Table): string {
  const cols = t.columns.join(', ');
  const values = t.columns.map((c) => `@${c}`).join(', ');
  const set = t.columns.filter((c) => c !== t.key).map((c) => `${c} = excluded.${c}`).join(', ');
  return `INSERT INTO ${t.name} (${cols}) VALUES (${values}) ON CONFLICT(${t.key}) DO UPDATE SET ${set}`;
}

export class TenancyMirror {
  /** The oldest transaction that was running at the last pass: rows stamped before it are copied. */
  private from = 0;
  private readonly upserts;
  /** One pass at a time (an older snapshot must not be copied over a newer one). */
  private readonly passes = new LatestRuns(() => this.copy());
  /**
   * Accounts whose binding this node's shards write (they run them): their SQLite row is the newest
   * there is (BindingRecords copies it to PostgreSQL), so a pass never copies PostgreSQL's over it:
   * a snapshot taken just before the shard wrote would otherwise undo the write for a moment, and
   * the owner's next copy would take the old row back to PostgreSQL. Set by the cluster node.
   */
  runsHere: (accountId: string) => boolean = () => false;
  /** Accounts whose binding the next pass copies whatever its stamp (`refresh`). */
  private stale = new Set<string>();
  /** Told after each pass (but the first: nothing is cached yet) what it changed that this node's
   *  caches may hold, when anything. Set by the cluster node (the same drops as a notice). */
  changed: (n: MirrorChanges) => void = () => {};

  private readonly absent;
  /** The rows as this node had them before a pass copies over them. */
  private readonly before;
  private readonly gone;

  /** `onAbsent`: told how many keys and seats the first pass found only here (a restored PostgreSQL). */
  constructor(private readonly pool: PgPool, private readonly db: Db, private readonly onAbsent: (n: { keys: number; seats: number }) => void = () => {}) {
    this.upserts = TABLES.map((t) => ({ t, stmt: db.prepare(upsertSql(t)) }));
    this.absent = {
      keys: db.prepare<[number, string]>('UPDATE keys SET revoked_at = ? WHERE revoked_at IS NULL AND id NOT IN (SELECT value FROM json_each(?))'),
      seats: db.prepare<[number, string]>('UPDATE seats SET removed_at = ? WHERE removed_at IS NULL AND id NOT IN (SELECT value FROM json_each(?))'),
    };
    this.before = {
      key: db.prepare<[string], KeyBefore>(`SELECT ${[...AUTH_COLUMNS, ...LIMIT_COLUMNS].join(', ')} FROM keys WHERE id = ?`),
      seatRemoved: db.prepare<[string], { removed_at: number | null }>('SELECT removed_at FROM seats WHERE id = ?'),
    };
    this.gone = {
      key: db.prepare<[number, string]>('UPDATE keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL'),
      seat: db.prepare<[number, string]>('UPDATE seats SET removed_at = ? WHERE id = ? AND removed_at IS NULL'),
    };
  }

  /** Copies what changed since the last pass (everything at the first) into SQLite, in one SQLite
   *  transaction. A pass already running may have taken its snapshot before the caller's write
   *  committed, so the caller gets the next pass, not that one. @returns the rows copied */
  sync(): Promise<number> {
    return this.passes.request('');
  }

  /**
   * A notice whose pass failed (PostgreSQL unreachable from this node): the keys it revoked and the
   * seats it removed are marked so here now, or the caches the notice drops would read them back
   * live from this SQLite. The next pass that succeeds copies PostgreSQL's rows over them: their
   * stamps are past the horizon, which a failed pass leaves where it was.
   */
  markGone(n: { keys?: readonly string[]; accounts?: readonly string[] }, now: number): void {
    writeTransaction(this.db, () => {
      for (const id of n.keys ?? []) this.gone.key.run(now, id);
      for (const id of n.accounts ?? []) this.gone.seat.run(now, id);
    });
  }

  /** Once the passes asked for by now have ended: before the pool they use is closed. */
  idle(): Promise<void> {
    return this.passes.settled();
  }

  /**
   * The next pass copies these accounts' bindings from PostgreSQL whatever their stamp. For accounts
   * that stopped running here, or whose owner copy PostgreSQL refused (the lease had moved on):
   * while this node ran them the passes left their rows to its shards, which may have written a
   * change PostgreSQL never took (a re-bind answered 503), or skipped a change of another owner. The
   * node's SQLite then holds the cluster's binding again, which it runs the account from next time
   * and copies back at its next change (an upgrade must not carry a refused login to PostgreSQL).
   */
  refresh(accountIds: Iterable<string>): void {
    for (const id of accountIds) this.stale.add(id);
  }

  private async copy(): Promise<number> {
    const again = [...this.stale];
    this.stale = new Set();
    const whole = this.from === 0; // every row: the first pass of this process
    const { next, rows, now } = await withTransaction(this.pool, async (c) => {
      // REPEATABLE READ: one snapshot for the horizon and every table, so a child row never comes
      // without its parent.
      await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const h = await c.query<{ xmin: string }>('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin');
      const out: Array<Record<string, unknown>[]> = [];
      for (const t of TABLES) {
        const r = t.name === 'account_bindings'
          ? await c.query(`SELECT ${t.columns.join(', ')} FROM ${t.name} WHERE txid >= $1 OR seat_id = ANY($2::text[]) ORDER BY ${t.key}`, [this.from, again])
          : await c.query(`SELECT ${t.columns.join(', ')} FROM ${t.name} WHERE txid >= $1 ORDER BY ${t.key}`, [this.from]);
        out.push(r.rows as Record<string, unknown>[]);
      }
      const now = whole ? Number((await c.query<{ ms: string }>('SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS ms')).rows[0]!.ms) : 0;
      return { next: Number(h.rows[0]!.xmin), rows: out, now };
    }).catch((err: unknown) => {
      this.refresh(again); // for the next pass
      throw err;
    });
    let copied = 0;
    const changes: MirrorChanges = { keys: [], limits: [], accounts: [] };
    // Nothing to copy (most passes): no transaction, so no write lock taken every second.
    if (!whole && rows.every((r) => r.length === 0)) {
      this.from = next;
      return 0;
    }
    // IMMEDIATE: a pass reads a key's or seat's row before it writes it; a deferred transaction would
    // fail at once (SQLITE_BUSY) when a shard commits between that read and the first write.
    writeTransaction(this.db, () => {
      for (const [i, { t, stmt }] of this.upserts.entries()) {
        for (const row of rows[i]!) {
          if (t.name === 'account_bindings' && this.runsHere(row.seat_id as string)) continue;
          for (const f of t.flags ?? []) row[f] = row[f] ? 1 : 0;
          // The first pass runs before anything reads this node's SQLite: no cache to tell.
          if (!whole && t.name === 'keys') keyChange(this.before.key.get(row.id as string), row, changes);
          if (!whole && t.name === 'seats' && row.removed_at !== null && this.before.seatRemoved.get(row.id as string)?.removed_at === null) changes.accounts.push(row.id as string);
          stmt.run(row);
          copied++;
        }
      }
      if (whole) {
        const ids = (name: string, key: string) => JSON.stringify(rows[TABLES.findIndex((t) => t.name === name)]!.map((r) => r[key]));
        const n = { keys: this.absent.keys.run(now, ids('keys', 'id')).changes, seats: this.absent.seats.run(now, ids('seats', 'id')).changes };
        if (n.keys + n.seats > 0) this.onAbsent(n);
      }
    });
    this.from = next;
    if (changes.keys.length + changes.limits.length + changes.accounts.length > 0) this.changed(changes);
    return copied;
  }
}
