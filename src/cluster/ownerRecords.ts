// What the account's owner copies to PostgreSQL after its shards changed it (gateway sessions,
// binding changes): the options both copiers share, and the wrap that runs a copy before the reply.
import type { Logger } from '../log.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import type { Db } from '../store/db.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import { LatestRuns } from '../util/latestRuns.js';
import type { Lease } from './leases.js';
import type { PgPool } from './pgPool.js';
import type { LocalShards } from './router.js';

/** What a copy to PostgreSQL did: `fenced` = this node does not hold the account's lease (nothing written). */
export type CopyOutcome = 'written' | 'fenced' | 'failed';

export interface OwnerRecordsOptions {
  pool: PgPool;
  sqlite: Db;
  nodeId: string;
  keeper: { leaseOf(accountId: string): Lease | undefined };
  clock: Clock;
  log: Logger;
}

/** The owner's shards, with `sync(key)` run after every call that `changes` and before its reply,
 *  so a node asked next (or the next owner) finds the change in PostgreSQL. */
export function syncAfter(
  shards: LocalShards, changes: (op: CommandName, args: unknown) => boolean, sync: (key: string) => Promise<unknown>,
): LocalShards {
  return {
    call: async <C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> => {
      const r = await shards.call(key, op, args, opts);
      if (changes(op, args)) await sync(key);
      return r;
    },
  };
}

/**
 * One fenced copy statement of the account's owner: `statement` gives the SQL (a statement that
 * answers `owned`: whether the lease held at that epoch) and its parameters, or undefined when there
 * is nothing to copy. Without the lease here, or with nothing to copy: `fenced`. A failure is logged
 * (`what` was not copied) and answered `failed`, never thrown.
 */
export async function fencedCopy(
  o: OwnerRecordsOptions, accountId: string, what: string, statement: (lease: Lease) => { sql: string; params: unknown[] } | undefined,
): Promise<CopyOutcome> {
  const lease = o.keeper.leaseOf(accountId);
  const s = lease && statement(lease);
  if (!s) return 'fenced';
  try {
    const r = await o.pool.query<{ owned: boolean }>(s.sql, s.params);
    return r.rows[0]?.owned ? 'written' : 'fenced';
  } catch (err) {
    o.log.warn(`${what} not copied to the cluster database`, { accountId, err: errorMessage(err) });
    return 'failed';
  }
}

/**
 * An owner's copies of one kind of record to PostgreSQL: one at a time per account, each reading
 * SQLite as it is then (LatestRuns: the newest lands last), and a copy that failed (the database
 * unreachable) is made again at every `retryFailed` until it lands or the lease moved on, so a
 * change made while the database was away reaches it once it is back, not only at the account's
 * next change.
 */
export class OwnerCopies {
  private readonly failed = new Set<string>();
  private readonly runs: LatestRuns<CopyOutcome>;

  constructor(copy: (accountId: string) => Promise<CopyOutcome>) {
    this.runs = new LatestRuns(async (id) => {
      const out = await copy(id);
      if (out === 'failed') this.failed.add(id);
      else this.failed.delete(id);
      return out;
    });
  }

  request(accountId: string): Promise<CopyOutcome> {
    return this.runs.request(accountId);
  }

  /** Accounts whose last copy failed. */
  get pending(): number {
    return this.failed.size;
  }

  retryFailed(): void {
    for (const id of this.failed) void this.runs.request(id);
  }
}
