// Where the routes write tenancy (keys, seats, bindings, audit). On one node that is the SQLite
// store itself (sqliteTenancyWrites: the same statements as before, answered at once); in cluster
// mode PostgreSQL first, then this node's mirror, and every other node is told to look at once
// (src/cluster/clusterTenancy.ts). Reads stay synchronous on the SQLite stores. An audited write
// takes its audit row (`audit`, made from the outcome) and writes it in the change's own transaction:
// a process killed after the change committed cannot leave it without its row.
import { AccountStore, type BindingRow } from './accounts.js';
import type { AuditOf, AuditStore, NewAuditRow } from './audit.js';
import { type Db, writeTransaction } from './db.js';
import type { NewKeyRow, SeatRow, SeatStateRow, TenancyStore } from './tenancy.js';

export interface TenancyWrites {
  /** One node (SQLite) or cluster (PostgreSQL first). */
  readonly clustered: boolean;
  insertKey(row: NewKeyRow, audit?: AuditOf<void>): Promise<void>;
  /** @returns whether a live key of that customer was revoked */
  revokeKey(id: string, customerId: string, now: number, audit?: AuditOf<boolean>): Promise<boolean>;
  /** @returns false (nothing written) when the old key was not live */
  replaceKey(oldId: string, customerId: string, successor: NewKeyRow, now: number, audit?: AuditOf<boolean>): Promise<boolean>;
  setKeyLimits(id: string, customerId: string, limits: { requestsPerSec: number | null; ordersPerSec: number | null }, audit?: AuditOf<boolean>): Promise<boolean>;
  /** A new seat and its first state (when it becomes ready), for every node's seat timer, and in
   *  cluster mode a new account's binding: one commit. On one node the shard's seat actor writes the
   *  state and its account actor the binding: only the seat row is written here.
   *  @returns false when the binding's login is bound or held for another live account (nothing written) */
  insertSeat(row: Omit<SeatRow, 'removed_at'>, state: SeatStateRow, binding?: BindingRow, audit?: AuditOf<boolean>): Promise<boolean>;
  /** @returns the ids of the keys scoped to it that were revoked, or undefined when no such live seat */
  removeSeat(id: string, customerId: string, now: number, audit?: AuditOf<string[] | undefined>): Promise<string[] | undefined>;
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
  /** The audit row of an action that is no tenancy write (an upgrade, a fault), after it. */
  addAudit(row: NewAuditRow): Promise<void>;
  /** Who has the login bound (a live account other than `exceptSeatId`), else held for a re-bind
   *  (cluster: PostgreSQL's answer, which a mirror may not have yet); undefined when nobody. */
  loginHolder(server: string, login: string, exceptSeatId: string): Promise<LoginHolder | undefined>;
}

/** The account a broker login is bound or held for: a binding's row has the sealed password and
 *  platform; a hold (a re-bind in flight) has neither. */
export type LoginHolder = Pick<BindingRow, 'seat_id' | 'customer_id'> & Partial<Pick<BindingRow, 'platform' | 'password_enc'>>;

export function sqliteTenancyWrites(db: Db, t: TenancyStore, audit: AuditStore): TenancyWrites {
  /** The change and its audit row in one SQLite transaction. */
  const audited = <T>(change: () => T, auditOf?: AuditOf<T>): T => {
    if (!auditOf) return change();
    return writeTransaction(db, () => {
      const out = change();
      const row = auditOf(out);
      if (row) audit.add(row);
      return out;
    });
  };
  return {
    clustered: false,
    insertKey: async (row, a) => audited(() => t.insertKey(row), a),
    revokeKey: async (id, customerId, now, a) => audited(() => t.revokeKey(id, customerId, now), a),
    replaceKey: async (oldId, customerId, successor, now, a) => audited(() => t.replaceKey(oldId, customerId, successor, now), a),
    setKeyLimits: async (id, customerId, limits, a) => audited(() => t.setKeyLimits(id, customerId, limits), a),
    insertSeat: async (row, _state, _binding, a) => audited(() => {
      t.insertSeat(row);
      return true;
    }, a),
    removeSeat: async (id, customerId, now, a) => audited(() => t.removeSeat(id, customerId, now), a),
    createBinding: async () => true,
    reserveLogin: async () => true,
    releaseLogin: async () => {},
    addAudit: async (row) => {
      audit.add(row);
    },
    loginHolder: async (server, login, exceptSeatId) => {
      const b = AccountStore.of(db).boundTo(server, login);
      return b && b.seat_id !== exceptSeatId ? b : undefined;
    },
  };
}
