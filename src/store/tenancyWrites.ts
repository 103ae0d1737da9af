// Where the routes write tenancy (keys, seats, bindings, audit). On one node that is the SQLite
// store itself (sqliteTenancyWrites: the same statements as before, answered at once); in cluster
// mode PostgreSQL first, then this node's mirror, and every other node is told to look at once
// (src/cluster/clusterTenancy.ts). Reads stay synchronous on the SQLite stores.
import type { BindingRow } from './accounts.js';
import type { AuditStore, NewAuditRow } from './audit.js';
import type { NewKeyRow, SeatRow, SeatStateRow, TenancyStore } from './tenancy.js';

export interface TenancyWrites {
  /** One node (SQLite) or cluster (PostgreSQL first). */
  readonly clustered: boolean;
  insertKey(row: NewKeyRow): Promise<void>;
  /** @returns whether a live key of that customer was revoked */
  revokeKey(id: string, customerId: string, now: number): Promise<boolean>;
  /** @returns false (nothing written) when the old key was not live */
  replaceKey(oldId: string, customerId: string, successor: NewKeyRow, now: number): Promise<boolean>;
  setKeyLimits(id: string, customerId: string, limits: { requestsPerSec: number | null; ordersPerSec: number | null }): Promise<boolean>;
  /** A new seat and its first state (when it becomes ready), for every node's seat timer, and in
   *  cluster mode a new account's binding: one commit. On one node the shard's seat actor writes the
   *  state and its account actor the binding: only the seat row is written here.
   *  @returns false when the binding's login is bound or held for another live account (nothing written) */
  insertSeat(row: Omit<SeatRow, 'removed_at'>, state: SeatStateRow, binding?: BindingRow): Promise<boolean>;
  /** @returns the ids of the keys scoped to it that were revoked, or undefined when no such live seat */
  removeSeat(id: string, customerId: string, now: number): Promise<string[] | undefined>;
  /** A new account's binding (sealed password), before its first start. On one node the shard
   *  writes it while it binds: nothing to do here (its login lock has checked the login).
   *  @returns false when the login is bound to another live account (cluster: nothing written) */
  createBinding(row: BindingRow): Promise<boolean>;
  /** An existing account is about to be re-bound to a login: hold it for the account, unless another
   *  live account has it. On one node the route's login lock and the SQLite check do it (true).
   *  @returns false when the login is bound or held for another account */
  reserveLogin(accountId: string, server: string, login: string): Promise<boolean>;
  /** The re-bind answered (either way): release the hold, and (cluster) bring every node's mirror up
   *  to the binding the account's owner recorded. */
  releaseLogin(accountId: string, server: string, login: string): Promise<void>;
  addAudit(row: NewAuditRow): Promise<void>;
}

export function sqliteTenancyWrites(t: TenancyStore, audit: AuditStore): TenancyWrites {
  return {
    clustered: false,
    insertKey: async (row) => t.insertKey(row),
    revokeKey: async (id, customerId, now) => t.revokeKey(id, customerId, now),
    replaceKey: async (oldId, customerId, successor, now) => t.replaceKey(oldId, customerId, successor, now),
    setKeyLimits: async (id, customerId, limits) => t.setKeyLimits(id, customerId, limits),
    insertSeat: async (row) => {
      t.insertSeat(row);
      return true;
    },
    removeSeat: async (id, customerId, now) => t.removeSeat(id, customerId, now),
    createBinding: async () => true,
    reserveLogin: async () => true,
    releaseLogin: async () => {},
    addAudit: async (row) => {
      audit.add(row);
    },
  };
}

