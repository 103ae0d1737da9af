// Binding changes made inside the owner's shard, copied to PostgreSQL (docs/cluster.md). A shard
// writes an account's binding in its node's SQLite as on one node: the login a bind verified (with
// its sealed password and the platform its broker server reports), the terminal build /Upgrade
// sets, a platform its server corrects at a later login. In cluster mode the account's owner is the
// one writer of its binding in PostgreSQL: it copies the whole row there, fenced by its lease like
// every other write of the account, one copy at a time per account, each reading the row as it is
// then. So the newest change lands last (a bind and an /Upgrade racing end as the shard ended them),
// and every node's mirror (and the next owner, which starts the account from it) has it.
import { randomUUID } from 'node:crypto';
import { apiError } from '../errors.js';
import { AccountStore } from '../store/accounts.js';
import type { NewAuditRow } from '../store/audit.js';
import { fenceSql } from './leases.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import type { LocalShards } from './router.js';
import { fencedCopy, OwnerCopies, type CopyOutcome, type OwnerRecordsOptions } from './ownerRecords.js';

// One statement: nothing unless the lease holds at that epoch; no stamp when nothing differs. With
// it, the audit rows of the actions whose change it copies (an upgrade's), each once (its reference):
// the change and its row commit together or not at all.
const SYNC_SQL = `WITH fence AS (${fenceSql({ account: 1, owner: 2, epoch: 3 })}),
  up AS (UPDATE account_bindings SET server = $4, login = $5, password_enc = $6, platform = $7, build = $8, updated_at = $9
    WHERE seat_id = $1 AND (server, login, password_enc, platform, build) IS DISTINCT FROM ($4, $5, $6, $7, $8::integer)
      AND EXISTS (SELECT 1 FROM fence)
    RETURNING 1),
  audited AS (INSERT INTO audit_log (customer_id, at, actor_key_id, action, target, detail_json, ref)
    SELECT r->>'customer_id', (r->>'at')::bigint, r->>'actor_key_id', r->>'action', r->>'target', r->>'detail_json', r->>'ref'
    FROM jsonb_array_elements($10::jsonb) AS r WHERE EXISTS (SELECT 1 FROM fence)
    ON CONFLICT (ref) WHERE ref IS NOT NULL DO NOTHING
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM fence) AS owned`;

/** The commands after which a shard may have changed an account's binding. */
const CHANGES: ReadonlySet<CommandName> = new Set<CommandName>(['account.bind', 'account.upgrade']);

export class BindingRecords {
  private readonly store: AccountStore;
  /** Copies to PostgreSQL; `copies.retryFailed()` makes the failed ones again (ClusterNode, every third of the lease). */
  readonly copies = new OwnerCopies((id) => this.copy(id));
  /** Audit rows of actions whose change the account's next copy carries (until one lands, or is fenced). */
  private readonly rows = new Map<string, Array<NewAuditRow & { ref: string }>>();
  /** `refresh`: the node's SQLite is to take the account's binding from PostgreSQL again (TenancyMirror.refresh). */
  constructor(private readonly o: OwnerRecordsOptions, private readonly refresh: (accountId: string) => void = () => {}) {
    this.store = AccountStore.of(o.sqlite);
  }

  /** The owner's side of calls (wraps FencedShards): a bind's or upgrade's effect is in PostgreSQL
   *  before its reply, so a node that reads the binding next (or takes the account over) finds it.
   *  One that could not be copied answers 503: done here, unknown to the cluster; the same request
   *  again copies it (the shard finds nothing to change). */
  wrap(shards: LocalShards): LocalShards {
    return {
      call: async <C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> => {
        // An upgrade's audit row is written here, with the build it records, not in the shard's SQLite.
        const { audit, ...rest } = args as ArgsOf<C> & { audit?: NewAuditRow };
        const r = await shards.call(key, op, (audit ? rest : args) as ArgsOf<C>, opts);
        if (!CHANGES.has(op)) return r;
        if (audit) this.rows.set(key, [...(this.rows.get(key) ?? []), { ...audit, ref: audit.ref ?? randomUUID() }]);
        if ((await this.sync(key)) === 'written') return r;
        throw apiError('SERVICE_UNAVAILABLE', `the binding of account ${key} changed on its node but the cluster database did not take it (the database is unreachable, or the account is moving between nodes); send the same request again`, { headers: { 'retry-after': '1' } });
      },
    };
  }

  /** Copies the account's binding (from this node's SQLite) to PostgreSQL, fenced. Never throws: a
   *  failed copy is logged and made again every third of the lease until it lands (OwnerCopies). */
  sync(accountId: string): Promise<CopyOutcome> {
    return this.copies.request(accountId);
  }

  private async copy(accountId: string): Promise<CopyOutcome> {
    let carried: Array<NewAuditRow & { ref: string }> = [];
    const out = await fencedCopy(this.o, accountId, 'account binding change', (lease) => {
      const row = this.store.get(accountId);
      carried = this.rows.get(accountId) ?? [];
      return row && {
        sql: SYNC_SQL,
        params: [accountId, this.o.nodeId, lease.epoch, row.server, row.login, row.password_enc, row.platform, row.build, row.updated_at, JSON.stringify(carried)],
      };
    });
    // Written with it; or never to be (not this node's: the change is undone here, the action
    // answered 503). A failed copy carries them again, with the change, when it is made again.
    if (out === 'written' && carried.length > 0) {
      const left = (this.rows.get(accountId) ?? []).filter((r) => !carried.includes(r));
      if (left.length > 0) this.rows.set(accountId, left);
      else this.rows.delete(accountId);
    } else if (out === 'fenced' && this.rows.has(accountId)) {
      this.o.log.warn('audit rows not written: the account moved to another node before its change was copied (the action answered 503)', { accountId, rows: this.rows.get(accountId)!.length });
      this.rows.delete(accountId);
    }
    // Not this node's to write (the lease moved on): what its shard wrote stays out of its SQLite too.
    if (out === 'fenced') this.refresh(accountId);
    return out;
  }
}
