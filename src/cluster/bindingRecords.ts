// Binding changes made inside the owner's shard, copied to PostgreSQL (docs/cluster.md). A shard
// writes an account's binding in its node's SQLite as on one node: the platform its broker server
// reports when it binds, the terminal build /Upgrade sets. In cluster mode the owner then copies
// those two fields to PostgreSQL, fenced by its lease like every other write of the account, so every
// node's mirror (and the next owner, which starts the account from it) has them.
import { AccountStore } from '../store/accounts.js';
import { errorMessage } from '../util/errorMessage.js';
import { fenceSql } from './leases.js';
import type { CommandName } from '../runtime/protocol.js';
import type { LocalShards } from './router.js';
import { syncAfter, type OwnerRecordsOptions } from './ownerRecords.js';

// One statement: nothing unless the lease holds at that epoch; no stamp when nothing differs.
const SYNC_SQL = `WITH fence AS (${fenceSql({ account: 1, owner: 2, epoch: 3 })}),
  up AS (UPDATE account_bindings SET platform = $4, build = $5, updated_at = $6
    WHERE seat_id = $1 AND (platform IS DISTINCT FROM $4 OR build IS DISTINCT FROM $5::integer) AND EXISTS (SELECT 1 FROM fence)
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned`;

/** The commands after which a shard may have changed an account's platform or build. */
const CHANGES: ReadonlySet<CommandName> = new Set<CommandName>(['account.bind', 'account.upgrade']);

export class BindingRecords {
  private readonly store: AccountStore;
  constructor(private readonly o: OwnerRecordsOptions) {
    this.store = new AccountStore(o.sqlite);
  }

  /** The owner's side of calls (wraps FencedShards): a bind's or upgrade's effect goes to PostgreSQL
   *  before its reply, so a node that reads the binding next (or takes the account over) finds it. */
  wrap(shards: LocalShards): LocalShards {
    return syncAfter(shards, (op) => CHANGES.has(op), (key) => this.sync(key));
  }

  /** Copies the account's platform and build (from this node's SQLite) to PostgreSQL, fenced. Never
   *  throws: the command was done; a failed copy is logged. */
  async sync(accountId: string): Promise<'written' | 'fenced' | 'failed'> {
    const lease = this.o.keeper.leaseOf(accountId);
    const row = this.store.get(accountId);
    if (!lease || !row) return 'fenced';
    try {
      const r = await this.o.pool.query<{ owned: boolean }>(SYNC_SQL, [accountId, this.o.nodeId, lease.epoch, row.platform, row.build, this.o.clock.now()]);
      return r.rows[0]?.owned ? 'written' : 'fenced';
    } catch (err) {
      this.o.log.warn('account binding change not copied to the cluster database', { accountId, err: errorMessage(err) });
      return 'failed';
    }
  }
}
