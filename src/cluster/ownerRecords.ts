// What the account's owner copies to PostgreSQL after its shards changed it (gateway sessions,
// binding changes): the options both copiers share, and the wrap that runs a copy before the reply.
import type { Logger } from '../log.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import type { Db } from '../store/db.js';
import type { Clock } from '../util/clock.js';
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
