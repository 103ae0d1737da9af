// Gateway sessions in cluster mode (docs/cluster.md, "Gateway sessions"; "Tables": gateway_sessions). The session host keeps its
// rows in its node's SQLite (store/sessions.ts) as on one node; the account's owner also copies an
// account's live sessions and their subscriptions to PostgreSQL after every command that can change
// them, fenced by its lease like every other write of the account. So any node resolves a handle
// (byHash), and a node that acquires the account writes them into its SQLite before its shard
// starts the account (restore), which resumes them as after a restart.
import { writeTransaction } from '../store/db.js';
import type { ArgsOf, CommandName } from '../runtime/protocol.js';
import { SessionStore, type SessionRow } from '../store/sessions.js';
import { fenceSql } from './leases.js';
import { SESSION_CHANGES } from './commandReach.js';
import type { LocalShards } from './router.js';
import { fencedCopy, OwnerCopies, syncAfter, type CopyOutcome, type OwnerRecordsOptions } from './ownerRecords.js';

interface PgSessionRow extends SessionRow { subscriptions_json: string }

const COLUMNS = 'handle_hash, account_id, customer_id, platform, handle_sealed, state, connected_at, invalidated_at, subscriptions_json';

// One statement: the account's live set as the owner has it (upserted), every other session of the
// account still live here ended; nothing at all unless the lease holds at that epoch.
const SYNC_SQL = `WITH fence AS (${fenceSql({ account: 1, owner: 2, epoch: 3 })}),
  gone AS (UPDATE gateway_sessions SET state = 'invalidated', invalidated_at = $4::bigint
    WHERE account_id = $1 AND state = 'live' AND NOT (handle_hash = ANY($5::text[])) AND EXISTS (SELECT 1 FROM fence) RETURNING 1),
  up AS (INSERT INTO gateway_sessions (${COLUMNS})
    SELECT ${COLUMNS} FROM json_populate_recordset(NULL::gateway_sessions, $6::json) WHERE EXISTS (SELECT 1 FROM fence)
    ON CONFLICT (handle_hash) DO UPDATE SET state = excluded.state, invalidated_at = excluded.invalidated_at, subscriptions_json = excluded.subscriptions_json
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned`;

function changesSessions(op: CommandName, args: unknown): boolean {
  // A bind ends the account's session when the login is of the other platform (its dialect).
  if (op === 'session.connect' || op === 'session.closeAccount' || op === 'account.bind') return true;
  if (op !== 'session.op') return false;
  const name = (args as ArgsOf<'session.op'>).op;
  return name !== 'SubscribedSymbols' && SESSION_CHANGES.test(name);
}

export type SessionRecordsOptions = OwnerRecordsOptions;

export class SessionRecords {
  private readonly store: SessionStore;
  /** Copies to PostgreSQL; `copies.retryFailed()` makes the failed ones again (ClusterNode, every third of the lease). */
  readonly copies = new OwnerCopies((id) => this.copy(id));
  constructor(private readonly o: SessionRecordsOptions) {
    this.store = new SessionStore(o.sqlite);
  }

  /** The owner's side of calls (wraps FencedShards): a session command's effect goes to PostgreSQL
   *  before its reply, so a node asked next (or the next owner) finds it. */
  wrap(shards: LocalShards): LocalShards {
    return syncAfter(shards, changesSessions, (key) => this.sync(key));
  }

  /** Copies the account's live sessions (from this node's SQLite) to PostgreSQL, fenced: after its
   *  session commands, and when its shard ended a session by itself (ClusterNode.publish). One copy
   *  at a time per account, each reading SQLite as it is then, so an older copy never lands after a
   *  newer one (a session ended here live again there). Never throws: the command was done; a failed
   *  copy is logged and made again every third of the lease until it lands (OwnerCopies). */
  sync(accountId: string): Promise<CopyOutcome> {
    return this.copies.request(accountId);
  }

  private copy(accountId: string): Promise<CopyOutcome> {
    return fencedCopy(this.o, accountId, 'gateway sessions', (lease) => {
      const live = this.store.liveOf(accountId).map((row) => ({
        ...row,
        subscriptions_json: JSON.stringify(Object.fromEntries(this.store.subscriptions(row.handle_hash).map((s) => [s.key, s.spec]))),
      }));
      return { sql: SYNC_SQL, params: [accountId, this.o.nodeId, lease.epoch, this.o.clock.now(), live.map((l) => l.handle_hash), JSON.stringify(live)] };
    });
  }

  /** A live session by its handle's hash, whichever node made it. */
  async byHash(hash: string): Promise<SessionRow | undefined> {
    const r = await this.o.pool.query<PgSessionRow>(`SELECT ${COLUMNS} FROM gateway_sessions WHERE handle_hash = $1 AND state = 'live'`, [hash]);
    const row = r.rows[0];
    if (!row) return undefined;
    const { subscriptions_json: _subs, ...session } = row;
    return { ...session, connected_at: Number(row.connected_at), invalidated_at: row.invalidated_at === null ? null : Number(row.invalidated_at) };
  }

  /**
   * Acquired accounts, before their shard starts them: their live sessions as PostgreSQL has them
   * go into this node's SQLite (with their subscriptions), and a session live here but not there
   * (ended on another node since this one last owned the account) is ended here.
   */
  async restore(accountIds: readonly string[]): Promise<number> {
    if (accountIds.length === 0) return 0;
    const r = await this.o.pool.query<PgSessionRow>(`SELECT ${COLUMNS} FROM gateway_sessions WHERE account_id = ANY($1::text[]) AND state = 'live'`, [accountIds]);
    const now = this.o.clock.now();
    const keep = new Set(r.rows.map((row) => row.handle_hash));
    writeTransaction(this.o.sqlite, () => {
      for (const id of accountIds) {
        for (const row of this.store.liveOf(id)) if (!keep.has(row.handle_hash)) this.store.upsert({ ...row, state: 'invalidated', invalidated_at: now });
      }
      for (const { subscriptions_json, ...row } of r.rows) {
        this.store.upsert({ ...row, connected_at: Number(row.connected_at), invalidated_at: null });
        this.store.setSubscriptions(row.handle_hash, JSON.parse(subscriptions_json) as Record<string, unknown>);
      }
    });
    return r.rows.length;
  }
}
