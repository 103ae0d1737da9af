// Binding changes made inside the owner's shard, copied to PostgreSQL (docs/cluster.md). A shard
// writes an account's binding in its node's SQLite as on one node: the login a bind verified (with
// its sealed password and the platform its broker server reports), the terminal build /Upgrade
// sets, a platform its server corrects at a later login. In cluster mode the account's owner is the
// one writer of its binding in PostgreSQL: it copies the whole row there, fenced by its lease like
// every other write of the account, one copy at a time per account, each reading the row as it is
// then. So the newest change lands last (a bind and an /Upgrade racing end as the shard ended them),
// and every node's mirror (and the next owner, which starts the account from it) has it.
import { apiError } from '../errors.js';
import { AccountStore } from '../store/accounts.js';
import { fenceSql } from './leases.js';
import type { CommandName } from '../runtime/protocol.js';
import type { LocalShards } from './router.js';
import { fencedCopy, OwnerCopies, syncAfter, type CopyOutcome, type OwnerRecordsOptions } from './ownerRecords.js';

// One statement: nothing unless the lease holds at that epoch; no stamp when nothing differs.
const SYNC_SQL = `WITH fence AS (${fenceSql({ account: 1, owner: 2, epoch: 3 })}),
  up AS (UPDATE account_bindings SET server = $4, login = $5, password_enc = $6, platform = $7, build = $8, updated_at = $9
    WHERE seat_id = $1 AND (server, login, password_enc, platform, build) IS DISTINCT FROM ($4, $5, $6, $7, $8::integer)
      AND EXISTS (SELECT 1 FROM fence)
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned`;

/** The commands after which a shard may have changed an account's binding. */
const CHANGES: ReadonlySet<CommandName> = new Set<CommandName>(['account.bind', 'account.upgrade']);

export class BindingRecords {
  private readonly store: AccountStore;
  /** Copies to PostgreSQL; `copies.retryFailed()` makes the failed ones again (ClusterNode, every third of the lease). */
  readonly copies = new OwnerCopies((id) => this.copy(id));
  /** `refresh`: the node's SQLite is to take the account's binding from PostgreSQL again (TenancyMirror.refresh). */
  constructor(private readonly o: OwnerRecordsOptions, private readonly refresh: (accountId: string) => void = () => {}) {
    this.store = new AccountStore(o.sqlite);
  }

  /** The owner's side of calls (wraps FencedShards): a bind's or upgrade's effect is in PostgreSQL
   *  before its reply, so a node that reads the binding next (or takes the account over) finds it.
   *  One that could not be copied answers 503: done here, unknown to the cluster; the same request
   *  again copies it (the shard finds nothing to change). */
  wrap(shards: LocalShards): LocalShards {
    return syncAfter(shards, (op) => CHANGES.has(op), async (key) => {
      if ((await this.sync(key)) === 'written') return;
      throw apiError('SERVICE_UNAVAILABLE', `the binding of account ${key} changed on its node but the cluster database did not take it (the database is unreachable, or the account is moving between nodes); send the same request again`, { headers: { 'retry-after': '1' } });
    });
  }

  /** Copies the account's binding (from this node's SQLite) to PostgreSQL, fenced. Never throws: a
   *  failed copy is logged and made again every third of the lease until it lands (OwnerCopies). */
  sync(accountId: string): Promise<CopyOutcome> {
    return this.copies.request(accountId);
  }

  private async copy(accountId: string): Promise<CopyOutcome> {
    const out = await fencedCopy(this.o, accountId, 'account binding change', (lease) => {
      const row = this.store.get(accountId);
      return row && {
        sql: SYNC_SQL,
        params: [accountId, this.o.nodeId, lease.epoch, row.server, row.login, row.password_enc, row.platform, row.build, row.updated_at],
      };
    });
    // Not this node's to write (the lease moved on): what its shard wrote stays out of its SQLite too.
    if (out === 'fenced') this.refresh(accountId);
    return out;
  }
}
