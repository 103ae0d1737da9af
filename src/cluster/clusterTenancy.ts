// Tenancy writes in cluster mode (the TenancyWrites port): PostgreSQL first (PgNode.writeTenancy,
// which also mirrors into this node's SQLite before it resolves), then a notice on `tagw.tenancy`
// that every other live node answers once it mirrored too. So a key created through node A
// authenticates on node B as soon as A answered, and a revoked key (or removed seat) is refused, and
// its open sockets closed, on every node. Nodes NATS cannot reach (or that lose the notice: core NATS
// is at most once) catch up at their next mirror pass, every second, which drops the same caches.
// A new account's binding also nudges every node's lease keeper, so its owner takes it within
// milliseconds rather than at the next round. A create (key, seat, binding) whose commit happened is
// answered as made even when PostgreSQL went away before the mirror pass after it: this node writes
// it into its SQLite with the single-node statements (`adopt`), the others mirror it later; a 503
// there would make a client that retries hold two keys or seats. An audited write's row is in its
// change's transaction (PgTenancy): a node killed after the commit cannot leave the change without it.
// The rows of actions that are no tenancy write (upgrades, faults) go through an outbox
// (auditOutbox.ts): on this node's disk before the action is answered, in PostgreSQL once it can be
// reached (at once, or when it is back, or at the node's next start after a crash).
import type { Subscription } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import type { Clock } from '../util/clock.js';
import { AccountStore, type BindingRow } from '../store/accounts.js';
import type { AuditOf, NewAuditRow } from '../store/audit.js';
import { AuditQueueStore } from '../store/auditQueue.js';
import type { Db } from '../store/db.js';
import { TenancyStore, type NewKeyRow, type SeatRow, type SeatStateRow } from '../store/tenancy.js';
import type { LoginHolder, TenancyWrites } from '../store/tenancyWrites.js';
import { errorMessage } from '../util/errorMessage.js';
import { AuditOutbox } from './auditOutbox.js';
import { clusterOverview } from './leases.js';
import type { NatsLink } from './natsLink.js';
import type { PgNode } from './pgNode.js';
import type { PgTenancy } from './pgTenancy.js';
import { SUBJECTS } from './subjects.js';

/** What the other nodes do after mirroring: forget cached keys, close their sockets, take leases. */
export interface TenancyNotice {
  /** Keys revoked (evict from the auth cache, close their sockets). */
  keys?: string[];
  /** Seats removed (close their sockets). */
  accounts?: string[];
  /** Keys whose own rate limits changed: their buckets go, the limits are read again at their next request. */
  limits?: string[];
  /** A new account exists: run a lease round now. */
  nudge?: boolean;
}

export interface ClusterTenancyOptions {
  nodeId: string;
  pg: PgNode;
  link: NatsLink;
  leaseMs: number;
  log: Logger;
  /** The node's SQLite: audit rows wait there for PostgreSQL. */
  sqlite: Db;
  /** This node's part after a notice (its own writes included): auth cache, sockets. */
  apply: (n: TenancyNotice) => void;
  /** How long a write waits for the other nodes' mirrors (default 2 s; then it answers anyway). */
  noticeWaitMs?: number;
  /** When a notice's revocations are marked here while PostgreSQL is unreachable (the gateway's clock). */
  clock: Clock;
}

export class ClusterTenancy implements TenancyWrites {
  readonly clustered = true;
  private readonly sub: Subscription;
  readonly audit: AuditOutbox;

  constructor(private readonly o: ClusterTenancyOptions) {
    // The row and this node's mirror of it; the other nodes copy it at their next pass (nothing to tell them).
    this.audit = new AuditOutbox({ queue: new AuditQueueStore(o.sqlite), write: async (row, ref) => void await o.pg.writeTenancy((t) => t.addAudit(row, ref)), log: o.log });
    this.sub = o.link.nc.subscribe(SUBJECTS.tenancy, {
      callback: (err, msg) => {
        if (err) return o.log.warn('tenancy notices ended', { err: errorMessage(err) });
        let n: TenancyNotice = {};
        try {
          n = msg.json<TenancyNotice>();
        } catch {
          o.log.warn('malformed tenancy notice ignored');
        }
        void this.o.pg.mirror.sync()
          .catch((e: unknown) => {
            o.log.warn('tenancy mirror pass failed', { err: errorMessage(e) });
            // PostgreSQL unreachable from here: a revoked key must not be read back live from this
            // node's SQLite once the notice dropped it from the caches.
            try {
              this.o.pg.mirror.markGone(n, o.clock.now());
            } catch (err) {
              o.log.warn('revoked keys and removed seats of a tenancy notice not marked here', { err: errorMessage(err) });
            }
          })
          .then(() => {
            this.o.apply(n);
            if (n.nudge) this.nudge();
          })
          .finally(() => msg.respond(''));
      },
    });
  }

  /** A lease round now (after one already out, which may have missed the new account). */
  private nudge(): void {
    this.o.pg.keeper.nudge();
  }

  private async write<T>(f: (t: PgTenancy) => Promise<T>, notice: (out: T) => TenancyNotice | undefined, adopt?: (out: T, sqlite: Db) => void): Promise<T> {
    const out = await this.o.pg.writeTenancy(f, adopt);
    // The database answers again: audit rows kept while it did not follow.
    if (this.audit.pending > 0) void this.audit.flush();
    const n = notice(out);
    if (n) {
      this.o.apply(n);
      if (n.nudge) this.nudge();
    }
    await this.tell(n ?? {});
    return out;
  }

  /** Waits (bounded) until every other live node mirrored the write. */
  private async tell(n: TenancyNotice): Promise<void> {
    const { link, pg, leaseMs, log, nodeId } = this.o;
    if (!link.up) return;
    try {
      const { nodes } = await clusterOverview(pg.pool);
      const others = nodes.filter((x) => x.heartbeatAgeMs < leaseMs && x.nodeId !== nodeId).length;
      if (others === 0) return;
      const replies = await link.nc.requestMany(SUBJECTS.tenancy, JSON.stringify(n), { strategy: 'count', maxMessages: others, maxWait: this.o.noticeWaitMs ?? 2_000 });
      let answered = 0;
      for await (const _ of replies) answered++; // each node's answer: it mirrored
      // A node slower than the bound (a loaded machine, a long mirror pass) sees the write at its next pass.
      if (answered < others) log.warn('not every node mirrored a tenancy write in time', { nodes: others, answered });
    } catch (err) {
      log.warn('other nodes not told of a tenancy write; they mirror it at their next pass', { err: errorMessage(err) });
    }
  }

  insertKey(row: NewKeyRow, audit?: AuditOf<void>): Promise<void> {
    return this.write((t) => t.insertKey(row, audit), () => undefined, (_, db) => {
      const local = new TenancyStore(db);
      if (!local.keyById(row.id)) local.insertKey(row);
    });
  }
  revokeKey(id: string, customerId: string, now: number, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.write((t) => t.revokeKey(id, customerId, now, audit), (ok) => (ok ? { keys: [id] } : undefined));
  }
  replaceKey(oldId: string, customerId: string, successor: NewKeyRow, now: number, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.write((t) => t.replaceKey(oldId, customerId, successor, now, audit), (ok) => (ok ? { keys: [oldId] } : undefined), (ok, db) => {
      const local = new TenancyStore(db);
      if (ok && !local.keyById(successor.id) && !local.replaceKey(oldId, customerId, successor, now)) local.insertKey(successor);
    });
  }
  setKeyLimits(id: string, customerId: string, limits: { requestsPerSec: number | null; ordersPerSec: number | null }, audit?: AuditOf<boolean>): Promise<boolean> {
    return this.write((t) => t.setKeyLimits(id, customerId, limits, audit), (ok) => (ok ? { limits: [id] } : undefined));
  }
  insertSeat(row: Omit<SeatRow, 'removed_at'>, state: SeatStateRow, binding?: BindingRow, audit?: AuditOf<boolean>): Promise<boolean> {
    // A new account: its owner takes it at once.
    return this.write((t) => t.createSeat(row, state, binding, audit), (made) => (made && binding ? { nudge: true } : undefined), (made, db) => {
      if (!made) return;
      const local = new TenancyStore(db);
      if (!local.seatById(row.id)) local.insertSeat(row);
      local.upsertSeatState(state);
      if (binding) AccountStore.of(db).upsert(binding);
    });
  }
  removeSeat(id: string, customerId: string, now: number, audit?: AuditOf<string[] | undefined>): Promise<string[] | undefined> {
    return this.write((t) => t.removeSeat(id, customerId, now, audit), (keys) => (keys ? { keys, accounts: [id] } : undefined));
  }
  createBinding(row: BindingRow): Promise<boolean> {
    return this.write((t) => t.upsertBinding(row), (written) => (written ? { nudge: true } : undefined), (written, db) => {
      if (written) AccountStore.of(db).upsert(row);
    });
  }
  reserveLogin(accountId: string, server: string, login: string): Promise<boolean> {
    // Nothing the mirrors copy: no pass, no notice.
    return this.o.pg.tenancy.claimLogin(accountId, server, login);
  }
  async releaseLogin(accountId: string, server: string, login: string): Promise<void> {
    // A write and its notice: every node mirrors the binding the owner copied before it answered.
    await this.write((t) => t.releaseLogin(accountId, server, login), () => undefined);
  }
  loginHolder(server: string, login: string, exceptSeatId: string): Promise<LoginHolder | undefined> {
    return this.o.pg.tenancy.loginHolder(server, login, exceptSeatId);
  }
  /** An action that is no tenancy write: on this node's disk at once; resolves once in PostgreSQL, or
   *  kept (the database unreachable); rejects on other failures. */
  addAudit(row: NewAuditRow): Promise<void> {
    return this.audit.add(row);
  }

  close(): void {
    this.sub.unsubscribe();
  }
}
