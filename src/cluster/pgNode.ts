// A cluster node's PostgreSQL side, assembled: the pool, the schema brought up to date (a newer one
// refuses: PgSchemaTooNewError, exit 5), the tenancy mirror filled, the idempotency ledger, and the
// lease keeper dividing the cluster's accounts. The gateway starts it in cluster mode and hands the
// keeper's events to its shards (start, stop, drop accounts) and to the owner cache (announce).
import type { Logger } from '../log.js';
import { writeTransaction, type Db } from '../store/db.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import { EngineUnavailableError, unavailableCode } from './engineUnavailable.js';
import { IdempotencyLedger } from './idempotencyLedger.js';
import { LeaseKeeper, monotonicClock, type LeaseEvents, type LeaseKeeperOptions } from './leaseKeeper.js';
import { leaseOwner, newIncarnation, reclaimLeases } from './leases.js';
import type { Alive } from './liveness.js';
import { refuseLiveTwin, type TwinCheck } from './nodeTwin.js';
import { PgSchemaTooNewError, runPgMigrations } from './pgMigrations.js';
import { describePgUrl, openPgPool, type PgPool } from './pgPool.js';
import { PgTenancy } from './pgTenancy.js';
import { TenancyMirror } from './tenancyMirror.js';

export interface PgNodeOptions {
  databaseUrl: string;
  nodeId: string;
  /** Where this node serves (shown to operators). */
  url: string;
  leaseMs: number;
  /** CLUSTER_SETTLE_MS (LeaseKeeperOptions.settleMs; unset: a third of the lease). */
  settleMs?: number;
  /** The node's SQLite (DATA_DIR), the mirror of the cluster's tenancy. */
  sqlite: Db;
  log: Logger;
  /** What the node does when it gains, hands over or loses accounts. `acquired` runs after a mirror
   *  pass, so the accounts' bindings are in the node's SQLite when it starts them. */
  events: LeaseEvents;
  /** Lease deadlines (default monotonic). */
  deadlineClock?: Clock;
  /** Idempotency expiry times, as on one node (the gateway's clock). */
  clock: Clock;
  /** How often expired idempotency records are deleted (default 60 s). */
  purgeEveryMs?: number;
  /** How often the tenancy mirror looks for rows other nodes wrote (default 1 s; a node that
   *  wrote a row itself, or is told of one, calls mirror.sync() at once). */
  mirrorEveryMs?: number;
  /** Connections for claims, tenancy and the mirror (default 10). The lease rounds have two of
   *  their own, so a burst of orders never holds up a renewal. */
  poolMax?: number;
  /** The node's NATS link, for the lease keeper's stepping down (LeaseKeeperOptions.nats). */
  nats?: LeaseKeeperOptions['nats'];
  /** This node's figures, written with each heartbeat (LeaseKeeperOptions.counters). */
  counters?: LeaseKeeperOptions['counters'];
}

export interface PgNode {
  /** This process's start, numbered by the cluster (leases.ts newIncarnation). */
  incarnation: number;
  pool: PgPool;
  tenancy: PgTenancy;
  mirror: TenancyMirror;
  ledger: IdempotencyLedger;
  keeper: LeaseKeeper;
  /** A tenancy write in cluster mode: PostgreSQL first, then a mirror pass, so this node's SQLite
   *  (what its routes read next) has it when this resolves. The others get it at their next pass.
   *  A create passes `adopt`: when the pass fails after the write committed (PostgreSQL went away in
   *  between), `adopt` writes the create into this node's SQLite itself and the write resolves, so
   *  the client gets its 201 and a retry makes no second one. Without it the pass's error is thrown. */
  writeTenancy<T>(write: (t: PgTenancy) => Promise<T>, adopt?: (out: T, sqlite: Db) => void): Promise<T>;
  /** The owner cache's lookup (owners.ts OwnerCacheOptions.lookup). */
  lookupOwner(accountId: string): Promise<{ owner: string | null; epoch: number }>;
  /** Restarted under its NODE_ID: the earlier process must be gone (dead or frozen) before this one
   *  takes its leases back at its first round; NodeIdInUseError (exit 2) when it still runs. Before start(). */
  refuseLiveTwin(ask?: () => Promise<Alive>): Promise<TwinCheck>;
  /** Starts the lease rounds, the mirror passes and the purge. */
  start(): void;
  /** SIGTERM: hand the accounts over (or abandon them), then close the pool. Never throws; a second call waits for the first. */
  close(opts: { handover: boolean }): Promise<void>;
}

/** PostgreSQL could not be reached or refused this node at start (one line, exit 1). */
export class PgUnavailableError extends EngineUnavailableError {}

export async function startPgNode(o: PgNodeOptions): Promise<PgNode> {
  const onIdleError = (err: Error) => o.log.warn('PostgreSQL connection lost', { err: err.message });
  const pool = openPgPool(o.databaseUrl, { applicationName: `tagw ${o.nodeId}`.slice(0, 63), max: o.poolMax ?? 10, onIdleError });
  // Renewals must not queue behind orders: waiting for a connection could outlast the lease.
  const leasePool = openPgPool(o.databaseUrl, { applicationName: `tagw ${o.nodeId} leases`.slice(0, 63), max: 2, onIdleError });
  const endPools = () => Promise.all([pool.end(), leasePool.end()]).catch(() => {});
  try {
    const applied = await runPgMigrations(pool, o.databaseUrl).catch((err: unknown) => {
      if (err instanceof PgSchemaTooNewError) throw err;
      // ECONNREFUSED and the like carry a code; the server's refusals (a wrong password) a message.
      throw new PgUnavailableError(`PostgreSQL ${describePgUrl(o.databaseUrl)}`, unavailableCode(err));
    });
    if (applied.length > 0) o.log.info('cluster schema migrated', { versions: applied });
    const tenancy = new PgTenancy(pool);
    const mirror = new TenancyMirror(pool, o.sqlite, (n) => o.log.warn('keys and seats in this node\'s mirror are not in PostgreSQL (restored from an older backup?): revoked and removed here', n));
    await mirror.sync();
    const ledger = new IdempotencyLedger(pool);
    const incarnation = await newIncarnation(pool);
    const { acquired, ...rest } = o.events;
    const leaseTenancy = new PgTenancy(leasePool);
    const keeper = new LeaseKeeper({
      db: leasePool, nodeId: o.nodeId, url: o.url, incarnation, leaseMs: o.leaseMs, clock: o.deadlineClock ?? monotonicClock, log: o.log,
      accounts: () => leaseTenancy.liveAccountIds(), ...(o.settleMs === undefined ? {} : { settleMs: o.settleMs }),
      reclaim: () => reclaimLeases(leasePool, o.nodeId, o.url, incarnation, o.leaseMs),
      ...(o.nats ? { nats: o.nats } : {}),
      ...(o.counters ? { counters: o.counters } : {}),
      events: {
        ...rest,
        acquired: (leases) => {
          // Started even when the pass failed (PostgreSQL just went away): an account whose binding
          // this node never mirrored then fails its start visibly (not bound).
          void mirror.sync().catch((err: unknown) => o.log.warn('tenancy mirror pass failed', { err: errorMessage(err) }))
            .finally(() => acquired?.(leases));
        },
      },
    });
    const timers: NodeJS.Timeout[] = [];
    let closing: Promise<void> | undefined;
    const every = (ms: number, what: string, f: () => Promise<unknown>) =>
      timers.push(setInterval(() => void f().catch((err: unknown) => o.log.warn(`${what} failed`, { err: errorMessage(err) })), ms));
    return {
      incarnation, pool, tenancy, mirror, ledger, keeper,
      lookupOwner: (accountId) => leaseOwner(pool, accountId),
      refuseLiveTwin: (ask) => refuseLiveTwin(pool, o.nodeId, incarnation, o.leaseMs, ask),
      async writeTenancy(write, adopt) {
        // A failure here: the write did not commit, or its outcome is unknown (the connection was
        // lost during COMMIT); either way the caller answers 503 (docs/cluster.md, failures).
        const out = await write(tenancy);
        try {
          await mirror.sync();
        } catch (err) {
          if (!adopt) throw err;
          writeTransaction(o.sqlite, () => adopt(out, o.sqlite));
          o.log.warn('a tenancy create committed but the mirror pass after it failed: this node wrote it into its SQLite, and every node mirrors it at its next pass', { err: errorMessage(err) });
        }
        return out;
      },
      start() {
        if (timers.length > 0) return;
        keeper.start();
        every(o.mirrorEveryMs ?? 1_000, 'tenancy mirror pass', () => mirror.sync());
        every(o.purgeEveryMs ?? 60_000, 'idempotency purge', () => ledger.purgeExpired(o.clock.now()));
      },
      close(opts) {
        // Once: a start that failed on NATS closes it, then the gateway's failed start again (whose
        // handover would only find the pools ended).
        return (closing ??= (async () => {
          for (const t of timers.splice(0)) clearInterval(t);
          await keeper.stop(opts);
          // A pass asked for before (a tenancy write, the handover's refresh) would meet ended pools.
          await mirror.idle();
          await endPools();
        })());
      },
    };
  } catch (err) {
    await endPools();
    throw err;
  }
}
