// Which account a classic request addresses, and whether the caller may use it (SPEC §5, §7):
// missing id → 400 ACCOUNT_ID_REQUIRED; scoped key on another id → 403; unknown or foreign id →
// 404; read-only key on a trading call → 403; seat not ACTIVE → 402 NO_SUBSCRIPTION.
import { boundedCache } from '../../util/boundedCache.js';
import type { Principal } from '../../auth/authenticator.js';
import { assertAccountScope, assertCanTrade } from '../../auth/rights.js';
import { apiError } from '../../errors.js';
import type { Services } from '../services.js';
import type { SeatRow } from '../../store/tenancy.js';
import { canonicalAccountId } from '../../util/accountId.js';

export class AccountAccess {
  // Seat rows change only on creation/removal; a short TTL keeps the hot path off SQLite.
  // ttlResolution 0: the age is read from performance.now() at each lookup. lru-cache's default
  // keeps the time for 1 ms behind a setTimeout made at the next lookup after it lapsed: a timer
  // per classic request at up to ~1,000/s, each waking an otherwise idle main thread.
  private readonly seats = boundedCache<string, SeatRow>(100_000, { ttl: 1_000, ttlResolution: 0 });
  /** ACTIVE is the last seat status (SPEC §3), so it is cached for good once seen. */
  private readonly active = new Set<string>();

  constructor(private readonly s: Services) {
    s.tenancy.onSeatRemoved((id) => {
      this.seats.delete(id);
      this.active.delete(id);
    });
  }

  /** Synchronous when everything is cached (the hot path); a promise only while the seat's status must be asked. */
  resolve(principal: Principal, q: { id?: string | undefined; accountId?: string | undefined }, trading: boolean): SeatRow | Promise<SeatRow> {
    const id = canonicalAccountId(q.id ?? q.accountId);
    if (!id) throw apiError('ACCOUNT_ID_REQUIRED', 'account id required: add ?id=<accountUUID>');
    assertAccountScope(principal, id);
    let row = this.seats.get(id);
    if (!row) {
      row = this.s.tenancy.seatById(id);
      if (row) this.seats.set(id, row);
    }
    if (!row || row.customer_id !== principal.customerId) throw apiError('NOT_FOUND', 'account not found');
    if (trading) assertCanTrade(principal);
    if (this.active.has(id)) return row;
    return this.askStatus(id, row);
  }

  /** The seat's status from its shard, until it is seen ACTIVE. A method of its own: the closure in
   *  resolve() made V8 allocate a context for its variables at every call, cached ones included. */
  private askStatus(id: string, found: SeatRow): Promise<SeatRow> {
    return this.s.shards.call(id, 'seat.get', { seatId: id }).then((st) => {
      if (st?.status !== 'ACTIVE') {
        throw apiError('NO_SUBSCRIPTION', st
          ? 'subscription not active: the seat is still being prepared (BUILDING_SERVER)'
          : 'subscription not active for this account');
      }
      this.active.add(id);
      return found;
    });
  }
}
