// Cluster pieces for tests: a node's NATS link, owner cache and router over a real nats-server,
// and an in-memory lease table standing in for PostgreSQL's account_leases (the truth the caches
// look up on a miss; every change is announced by the node that makes it, as leases do); the
// engines gateways in cluster mode need, started together.
import { LeaseKeeper, monotonicClock, nudgeOnRelease } from '../../src/cluster/leaseKeeper.js';
import { NatsLink } from '../../src/cluster/natsLink.js';
import { startNatsNode, type NatsNode } from '../../src/cluster/natsNode.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { OwnerCache, type OwnerInfo } from '../../src/cluster/owners.js';
import type { LocalShards } from '../../src/cluster/router.js';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { hashSecret } from '../../src/auth/keys.js';
import type { ConfigInput } from '../../src/config.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { createLogger } from '../../src/log.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';
import { createDatabase, EMPTY_START_SETTLE_MS, startNats, type Engine } from './engines.js';
import { sharedPostgres } from './postgres.js';
import { startTestGateway, TEST_SHARDS, type TestGateway } from './gateway.js';
import { startBridgeSim, type BridgeSim } from './sim-helpers.js';
import { startTcpProxy, type TcpProxy } from './tcpProxy.js';
import { until } from './until.js';

export class MemoryLeases {
  private readonly rows = new Map<string, OwnerInfo>();
  lookups = 0;
  /** Set: lookups fail with it (the store is down). */
  failure: Error | undefined;

  lookup = async (accountId: string): Promise<OwnerInfo> => {
    this.lookups++;
    if (this.failure) throw this.failure;
    return this.rows.get(accountId) ?? { owner: null, epoch: 0 };
  };

  /** A change of owner (null: released or expired), announced through `by`'s cache. */
  set(accountId: string, owner: string | null, by?: OwnerCache): OwnerInfo {
    const prev = this.rows.get(accountId);
    const info = { owner, epoch: owner === null ? (prev?.epoch ?? 0) : (prev?.epoch ?? 0) + 1 };
    this.rows.set(accountId, info);
    by?.announce(accountId, info);
    return info;
  }
}

export interface TestNode extends NatsNode {
  id: string;
  /** What the relay delivered to this node. */
  events: ShardEvent[];
}

export async function startNode(id: string, natsUrl: string, shards: LocalShards, leases: MemoryLeases, opts: { ownerWaitMs?: number; incarnation?: number; holds?: (accountId: string) => boolean } = {}): Promise<TestNode> {
  const events: ShardEvent[] = [];
  const node = await startNatsNode({
    url: natsUrl, nodeId: id, shards, ...(opts.incarnation === undefined ? {} : { incarnation: opts.incarnation }), lookupOwner: leases.lookup, ownerWaitMs: opts.ownerWaitMs ?? 2_000,
    onEvent: (ev) => events.push(ev), log: createLogger('silent'), reconnectWaitMs: 50, ...(opts.holds ? { holds: opts.holds } : {}),
  });
  return { ...node, id, events };
}

export interface ClusterEngines {
  /** The simulator behind a bridge: every node's `bridgeUrl` is `sim.url`. */
  sim: BridgeSim;
  nats: Engine;
  /** The run's shared PostgreSQL unless the test gave its own: stop() leaves the shared one running. */
  postgres: Engine;
  /** A new database on `postgres`, migrated. */
  databaseUrl: string;
  pool: PgPool;
  /** Tenancy writes for the test's fixtures (customers, keys, seats, bindings). */
  tenancy: PgTenancy;
  /** The pool, the simulator and both engines (stop the gateways first). */
  stop(): Promise<void>;
}

/** What cluster-mode gateways need: a bridged simulator, nats-server and a migrated database on
 *  `postgres` (the run's shared PostgreSQL unless given). */
export async function startClusterEngines(own?: Engine): Promise<ClusterEngines> {
  const [sim, nats, postgres] = await Promise.all([startBridgeSim(), startNats(), own ?? sharedPostgres()]);
  const databaseUrl = await createDatabase(postgres.url);
  const pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  return {
    sim, nats, postgres, databaseUrl, pool, tenancy: new PgTenancy(pool),
    async stop() {
      await pool.end();
      await sim.close();
      await Promise.all([nats.stop(), postgres.stop()]);
    },
  };
}

/** A test file's cluster engines: started before its tests, stopped after them. The result stands for
 *  the engines once the file's beforeAll hooks run (reading it before throws). A file registers its
 *  own hooks after this call: its beforeAll then runs after the engines start, and its afterAll (the
 *  gateways, proxies) before they stop (vitest runs afterAll hooks in reverse order of registration). */
export function useClusterEngines(): ClusterEngines {
  let engines: ClusterEngines | undefined;
  beforeAll(async () => {
    engines = await startClusterEngines();
  }, 60_000);
  afterAll(async () => {
    await engines?.stop();
  });
  return new Proxy({} as ClusterEngines, {
    get(_, key) {
      if (!engines) throw new Error(`the cluster engines are not started yet (read ${String(key)} outside a test or hook)`);
      return engines[key as keyof ClusterEngines];
    },
  });
}

/** In-process gateways in cluster mode on `engines`, one per id, bridged to its simulator and
 *  sharing one secret key (every node opens every node's sealed passwords); no account yet.
 *  `perNode`: a node's own settings (its NATS_URL through a proxy, say). */
export async function startClusterGateways(engines: ClusterEngines, nodeIds: readonly string[], o: { shards: number; leaseMs: number; perNode?: (nodeId: string) => ConfigInput }): Promise<TestGateway[]> {
  const secretKey = randomBytes(32).toString('hex');
  const out: TestGateway[] = [];
  for (const nodeId of nodeIds) {
    out.push(await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: o.shards, natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl,
      nodeId, clusterLeaseMs: o.leaseMs, clusterSettleMs: EMPTY_START_SETTLE_MS, secretKey, ...o.perNode?.(nodeId),
    }));
  }
  return out;
}

/** A customer 'c1' with one API key and one seat bound to `login` on Sim-P5-Demo (`p4`: on
 *  Sim-P4-Demo; password 'pw', sealed with `secretKey`, which every node must share), in PostgreSQL
 *  before any node starts. `customer`: another id and name (the operator's, 'default', whose
 *  keys and seats the test management key then manages). */
export async function seedBoundAccount(t: PgTenancy, o: { apiKey: { id: string; secret: string }; account: string; login: string; secretKey: Buffer; p4?: boolean; customer?: { id: string; name: string } }): Promise<void> {
  const now = Date.now();
  const { id: customer, name } = o.customer ?? { id: 'c1', name: 'bots' };
  await t.createCustomer(customer, name, now);
  await t.insertKey({ id: o.apiKey.id, customer_id: customer, kind: 'api', hash: hashSecret(o.apiKey.secret), label: 'bot', read_only: 0, account_scoped: 0, seat_id: null, created_at: now });
  await t.insertSeat({ id: o.account, customer_id: customer, private_hosting: 0, region: null, created_at: now });
  await t.upsertSeatState({ seat_id: o.account, status: 'ACTIVE', ready_at: now, updated_at: now });
  await t.upsertBinding({
    seat_id: o.account, customer_id: customer, ...(o.p4 ? { platform: 'P4', server: 'Sim-P4-Demo' } : { platform: 'P5', server: 'Sim-P5-Demo' }), login: o.login,
    password_enc: new SecretBox(o.secretKey).seal('pw', o.account), build: null, created_at: now, updated_at: now,
  });
}

/** Waits until every one of `nodes` sees them all live, `ownerId` holds the account's lease, and its
 *  shard has the account connected (its broker login up); returns the owner and another node. */
export async function ownerConnected(nodes: readonly TestGateway[], account: string, ownerId: string): Promise<{ owner: TestGateway; other: TestGateway }> {
  const owner = nodes.find((n) => n.gw.cluster!.nodeId === ownerId)!;
  await until(() => nodes.every((n) => n.gw.cluster!.liveNodes().length === nodes.length) && owner.gw.cluster!.owned().includes(account), `${ownerId} to own the account`, 30_000);
  await until(async () => (await owner.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
  return { owner, other: nodes.find((n) => n !== owner)! };
}

export interface KeeperNode {
  keeper: LeaseKeeper;
  /** How many leases the keeper holds. */
  holds(): number;
  /** Stops the keeper (no handover), its owner cache and NATS link. */
  close(): Promise<void>;
}

/** A lease keeper on `pool` that announces its acquisitions and releases on its own NATS connection
 *  through an OwnerCache; `nudge`: a "no owner" announcement runs its round at once, as ClusterNode wires it. */
export async function startKeeperNode(opts: { natsUrl: string; id: string; pool: PgPool; accounts: readonly string[]; leaseMs: number; nudge: boolean }): Promise<KeeperNode> {
  const log = createLogger('silent');
  const { id } = opts;
  const link = await NatsLink.connect({ url: opts.natsUrl, name: id, log });
  const owners = new OwnerCache({ link, log, lookup: async () => ({ owner: null, epoch: 0 }) });
  const keeper: LeaseKeeper = new LeaseKeeper({
    db: opts.pool, nodeId: id, leaseMs: opts.leaseMs, clock: monotonicClock, accounts: () => opts.accounts, log,
    events: {
      acquired: (ls) => ls.forEach((l) => owners.announce(l.accountId, { owner: id, epoch: l.epoch })),
      released: (ls) => ls.forEach((l) => owners.announce(l.accountId, { owner: null, epoch: l.epoch })),
    },
  });
  if (opts.nudge) nudgeOnRelease(owners, keeper);
  await link.nc.flush();
  return {
    keeper,
    holds: () => keeper.held().length,
    close: async () => {
      await keeper.stop({ handover: false });
      owners.close();
      await link.close();
    },
  };
}

export interface ProxiedClusterGateway {
  engines: ClusterEngines;
  /** Between the gateway and PostgreSQL: the test cuts, refuses and watches its connections. */
  proxy: TcpProxy;
  /** The database's connection string through the proxy (it carries the engine's password). */
  databaseUrl: string;
  gw: TestGateway;
  /** The gateway, then the proxy, then the engines. */
  stop(): Promise<void>;
}

/** One cluster-mode gateway (bridge mode, one shard, a 9 s lease) on its own nats-server and database, reaching
 *  PostgreSQL through a TCP proxy the test controls; its log lines go to `logs`. */
export async function startProxiedClusterGateway(nodeId: string, opts: { clusterOwnerWaitMs: number; logs: string[]; seatBuildMs?: number }): Promise<ProxiedClusterGateway> {
  const engines = await startClusterEngines();
  const proxy = await startTcpProxy(engines.postgres.port);
  const u = new URL(engines.databaseUrl);
  u.port = String(proxy.port);
  const databaseUrl = u.toString();
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: TEST_SHARDS, secretKey: randomBytes(32).toString('hex'),
    natsUrl: engines.nats.url, databaseUrl, nodeId, clusterLeaseMs: 9_000, clusterSettleMs: EMPTY_START_SETTLE_MS, clusterOwnerWaitMs: opts.clusterOwnerWaitMs,
    ...(opts.seatBuildMs !== undefined ? { seatBuildMs: opts.seatBuildMs } : {}),
  }, { log: createLogger('debug', {}, (line) => opts.logs.push(line)) });
  return {
    engines, proxy, databaseUrl, gw,
    async stop() {
      await gw.stop().catch(() => undefined);
      await proxy.close();
      await engines.stop();
    },
  };
}
