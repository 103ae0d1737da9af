// Issue 20's scenarios as an operator runs them: N gateway PROCESSES in cluster mode (this run's
// compiled build, each with its own DATA_DIR, one shared secret key and management key), one
// simulator process in bridge mode, a real nats-server and PostgreSQL. Signals are real: SIGKILL,
// SIGSTOP/SIGCONT, SIGTERM. nats-server is started once per test FILE (startEngines), PostgreSQL is
// the run's shared one unless the file takes it away (ownPostgres); the clusters a file's tests
// start share them (one database each, node ids unique per cluster).
import { connect } from '@nats-io/transport-node';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll } from 'vitest';
import { DEFAULT_CUSTOMER } from '../../src/auth/bootstrap.js';
import { generateKey, hashSecret } from '../../src/auth/keys.js';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { SUBJECTS } from '../../src/cluster/subjects.js';
import { DEFAULT_CONFIG_PATH, type FaultSpecConfig, type MarketHours, type SimConfigInput } from '../../src/sim/config.js';
import type { TenancyNotice } from '../../src/cluster/clusterTenancy.js';
import { builtEntry } from './build.js';
import { createDatabase, EMPTY_START_SETTLE_MS, startNats, startPostgres, type Engine, type NatsEngine } from './engines.js';
import { sharedPostgres } from './postgres.js';
import { cleanupProcesses, startProcess, type GatewayProcess } from './process.js';
import { openedBy, type BrokerBook, type BrokerOrder } from './orderLedger.js';
import { startTcpProxy, type TcpProxy } from './tcpProxy.js';
import { until } from './until.js';

export const CLUSTER_MANAGEMENT_KEY = 'cluster-scenarios-management-key';
/** The key that seals broker passwords: every node must open what another sealed. */
const SECRET_KEY = 'c1'.repeat(32);
/** The simulator process's servers (config/sim-servers.json): accounts are on the first unless asked. */
export const SIM_SERVERS = { 'Sim-P5-Demo': 'P5', 'Sim-P4-Demo': 'P4' } as const;
export type SimServer = keyof typeof SIM_SERVERS;

export interface Engines { nats: NatsEngine; pg: Engine; stop(): Promise<void> }

/** NATS on a free port, for one test file, and `postgres` (PostgreSQL of its own on a free port
 *  unless given: stop() stops both). */
export async function startEngines(postgres?: Engine): Promise<Engines> {
  const [nats, pgEngine] = await Promise.all([startNats(), postgres ?? startPostgres()]);
  return { nats, pg: pgEngine, stop: async () => void (await Promise.all([nats.stop(), pgEngine.stop()])) };
}

/** One TCP proxy per node (named by its id's last letter) between the node and nats-server, so a
 *  test cuts one node's link (`proxy.target(1); proxy.cut()`) and restores it
 *  (`proxy.target(engines.nats.port)`). Call before useCluster and give it `nodeEnv`. */
export function useNatsProxies(letters: readonly string[]): { of(nodeId: string): TcpProxy; nodeEnv: NonNullable<ClusterOptions['nodeEnv']> } {
  const proxies = new Map<string, TcpProxy>();
  beforeAll(async () => {
    for (const n of letters) proxies.set(n, await startTcpProxy(1));
    return async () => {
      for (const p of proxies.values()) await p.close();
    };
  });
  const of = (nodeId: string) => proxies.get(nodeId.slice(-1))!;
  return {
    of,
    nodeEnv: (id, engines) => {
      const proxy = of(id);
      proxy.target(engines.nats.port);
      return { NATS_URL: `nats://127.0.0.1:${proxy.port}` };
    },
  };
}

/** A test file's engines and cluster: started before its tests, stopped after them. `ownPostgres`:
 *  the file kills or restarts PostgreSQL, so it gets one of its own instead of the run's shared one. */
export function useCluster(opts: ClusterOptions & { ownPostgres?: boolean } = {}): { readonly engines: Engines; readonly cluster: ClusterProcs } {
  let engines: Engines | undefined;
  let cluster: ClusterProcs | undefined;
  beforeAll(async () => {
    engines = await startEngines(opts.ownPostgres ? undefined : await sharedPostgres());
    cluster = await ClusterProcs.start(engines, opts);
  }, 120_000);
  afterAll(async () => {
    engines?.nats.thaw();
    await cluster?.close();
    cleanupProcesses();
    await engines?.stop();
  }, 60_000);
  return {
    get engines() { return engines!; },
    get cluster() { return cluster!; },
  };
}

export type NodeState = 'running' | 'stopped' | 'down';

export interface ClusterNode {
  id: string;
  /** The same port is asked for again at a restart (another one if it was taken meanwhile). */
  url: string;
  port: number;
  dir: string;
  proc: GatewayProcess;
  state: NodeState;
}

export interface ClusterOptions {
  nodes?: number;
  /** CLUSTER_LEASE_MS: short, so takeovers happen within a test. */
  leaseMs?: number;
  /** CLUSTER_OWNER_WAIT_MS. */
  ownerWaitMs?: number;
  /** More environment for every node. */
  env?: Record<string, string>;
  /** The nodes reach PostgreSQL at this port (a test's proxy in front of it); the test's own reads do not. */
  pgPort?: number;
  /** More environment for one node, asked at each launch (a NATS_URL through a test's proxy). */
  nodeEnv?: (id: string, engines: Engines) => Record<string, string>;
  /** Faults of the simulator process on Sim-P5-Demo from its start (its config's `faults`, e.g. the
   *  first trade of login `<prefix>-lost`, account(server, { login: 'lost' }), executed with its reply
   *  lost). */
  simFaults?: (prefix: string) => FaultSpecConfig[];
  /** The simulator process's servers (config/sim-servers.json as read), changed in place before it
   *  starts (bench/lib/clusterNearQuotes.ts: more symbols, for more quotes a second). */
  simServers?: (config: SimConfigInput) => void;
  /** The simulator process's `--market-hours` (default: each symbol's own sessions; `always`: forex
   *  ticks and trades on a weekend too). */
  simMarketHours?: MarketHours;
}

export interface LeaseRow { owner: string | null; epoch: number; live: boolean }

let clusters = 0;

export class ClusterProcs {
  readonly nodes: ClusterNode[] = [];
  private logins = 0;
  private perNode: ClusterOptions['nodeEnv'];

  private constructor(
    readonly engines: Engines,
    readonly databaseUrl: string,
    readonly sim: { proc: GatewayProcess; port: number },
    private readonly nodeEnv: Record<string, string>,
    readonly prefix: string,
    /** PostgreSQL restarts under the scenarios: a dropped idle client is expected (no handler). */
    private readonly db: PgPool,
    private readonly customerId: string,
    /** CLUSTER_LEASE_MS of every node. */
    readonly leaseMs: number,
  ) {}

  static async start(engines: Engines, opts: ClusterOptions = {}): Promise<ClusterProcs> {
    const prefix = `c${++clusters}`;
    const [databaseUrl, sim] = await Promise.all([createDatabase(engines.pg.url, prefix), startSim(prefix, opts)]);
    const nodesDb = new URL(databaseUrl);
    if (opts.pgPort !== undefined) nodesDb.port = String(opts.pgPort);
    const leaseMs = opts.leaseMs ?? 1_500;
    const env = {
      NATS_URL: engines.nats.url, DATABASE_URL: nodesDb.toString(),
      BROKER_MODE: 'bridge', BRIDGE_URL: `tcp://127.0.0.1:${sim.port}`,
      CLUSTER_LEASE_MS: String(leaseMs), CLUSTER_OWNER_WAIT_MS: String(opts.ownerWaitMs ?? 4_000),
      // No account exists before every node runs (account() makes them later): the cold-start settle
      // at most EMPTY_START_SETTLE_MS (10 s with cluster-restart-reclaim's 30 s lease by default).
      CLUSTER_SETTLE_MS: String(Math.min(EMPTY_START_SETTLE_MS, Math.floor(leaseMs / 3))),
      TAGW_SECRET_KEY: SECRET_KEY, GATEWAY_MANAGEMENT_KEY: CLUSTER_MANAGEMENT_KEY,
      LOG_LEVEL: 'info', DRAIN_TIMEOUT_MS: '3000', RECONNECT_BASE_MS: '50', RECONNECT_CAP_MS: '500',
      ...opts.env,
    };
    // The cluster's customer, in PostgreSQL before any node starts: each node's first mirror pass
    // copies it, so every node's bootstrap finds the same 'default' customer for the management key.
    const db = openPgPool(databaseUrl, { max: 2 });
    await runPgMigrations(db, databaseUrl);
    const customerId = randomUUID();
    await new PgTenancy(db).createCustomer(customerId, DEFAULT_CUSTOMER, Date.now());
    const c = new ClusterProcs(engines, databaseUrl, sim, env, prefix, db, customerId, Number(env.CLUSTER_LEASE_MS));
    c.perNode = opts.nodeEnv;
    const ids = Array.from({ length: opts.nodes ?? 3 }, (_, i) => `${prefix}-${String.fromCharCode(97 + i)}`);
    await Promise.all(ids.map((id) => c.launch(id)));
    return c;
  }

  node(id: string): ClusterNode {
    const n = this.nodes.find((x) => x.id === id);
    if (!n) throw new Error(`no node ${id} (nodes: ${this.nodes.map((x) => x.id).join(', ')})`);
    return n;
  }

  running(): ClusterNode[] {
    return this.nodes.filter((n) => n.state === 'running');
  }

  /** Starts a node (again: same id, DATA_DIR and port, unless `newPort`) and waits until it listens. */
  async launch(id: string, opts: { newPort?: boolean } = {}): Promise<ClusterNode> {
    const prev = this.nodes.find((x) => x.id === id);
    if (prev && prev.state !== 'down') throw new Error(`${id} is ${prev.state}`);
    const env = { ...this.nodeEnv, ...this.perNode?.(id, this.engines), NODE_ID: id, ...(prev && !opts.newPort ? { PORT: String(prev.port) } : {}) };
    let proc = startProcess(env, prev?.dir);
    let url = await proc.listening.catch((err: Error) => err);
    if (url instanceof Error && prev && url.message.includes('cannot listen')) {
      // The old port was taken meanwhile (as a client socket's local port): another one.
      proc = startProcess({ ...env, PORT: '0' }, prev.dir);
      url = await proc.listening;
    }
    if (url instanceof Error) throw url;
    const port = Number(new URL(url).port);
    const node: ClusterNode = { id, url, port, dir: proc.dir, proc, state: 'running' };
    if (prev) Object.assign(prev, node);
    else this.nodes.push(node);
    return prev ?? node;
  }

  /** Another process under `id`'s NODE_ID beside the one this cluster runs (a DATA_DIR and port of
   *  its own): a restart on another machine, or a second process given the same id by mistake.
   *  `env`: more environment for it (a DATABASE_URL through a test's proxy). */
  twin(id: string, env: Record<string, string> = {}): GatewayProcess {
    return startProcess({ ...this.nodeEnv, ...env, NODE_ID: id });
  }

  /** The lease row with its expiry on PostgreSQL's clock (text, to compare there). */
  async leaseExpiry(accountId: string): Promise<LeaseRow & { expiresAt: string }> {
    const r = await this.db.query<{ owner: string | null; epoch: string; live: boolean; expires_at: string }>(
      'SELECT owner, epoch, (owner IS NOT NULL AND expires_at > now()) AS live, expires_at::text FROM account_leases WHERE account_id = $1', [accountId]);
    const row = r.rows[0]!;
    return { owner: row.owner, epoch: Number(row.epoch), live: row.live, expiresAt: row.expires_at };
  }

  /** When node `id`'s process last heartbeated, on PostgreSQL's clock (text, to compare there). */
  async heartbeat(id: string): Promise<string> {
    const r = await this.db.query<{ at: string }>(
      `SELECT heartbeat_at::text AS at FROM cluster_nodes WHERE node_id = $1`, [id]);
    return r.rows[0]!.at;
  }

  /** Node `id`'s heartbeat made now rather than at its next renewal (up to a third of the lease
   *  away): a nudge, as for a new account, has every running node run a lease round at once, which
   *  heartbeats first. Returns that heartbeat (PostgreSQL's clock, text); the renewal timer's own
   *  round stands in should the nudge be missed. */
  async heartbeatNow(id: string): Promise<string> {
    const beat = await this.heartbeat(id);
    await this.announce({ nudge: true });
    let now = beat;
    await until(async () => (now = await this.heartbeat(id)) !== beat, `a heartbeat of ${id}`, this.leaseMs);
    return now;
  }

  /** Each node's last heartbeat (ms since the epoch, on PostgreSQL's clock) and whether it said its
   *  NATS link was up then. */
  async beats(): Promise<Array<{ id: string; atMs: number; natsUp: boolean | null }>> {
    const r = await this.db.query<{ node_id: string; at_ms: number; nats_up: boolean | null }>(
      'SELECT node_id, (extract(epoch FROM heartbeat_at) * 1000)::float8 AS at_ms, nats_up FROM cluster_nodes ORDER BY node_id');
    return r.rows.map((row) => ({ id: row.node_id, atMs: row.at_ms, natsUp: row.nats_up }));
  }

  /** PostgreSQL's clock now, in ms since the epoch. */
  async dbNowMs(): Promise<number> {
    return (await this.db.query<{ ms: number }>('SELECT (extract(epoch FROM now()) * 1000)::float8 AS ms')).rows[0]!.ms;
  }

  /** Whether PostgreSQL's clock is still before `at` (a time it gave). */
  async before(at: string): Promise<boolean> {
    return (await this.db.query<{ b: boolean }>('SELECT now() < $1::timestamptz AS b', [at])).rows[0]!.b;
  }

  /** SIGKILL: no handover, its leases run out. */
  async kill(id: string): Promise<void> {
    const n = this.node(id);
    n.proc.child.kill('SIGKILL');
    await n.proc.exited;
    n.state = 'down';
  }

  /** SIGTERM: hands its accounts over, then exits; resolves with the exit code. */
  async term(id: string): Promise<number | null> {
    const n = this.node(id);
    n.proc.child.kill('SIGTERM');
    const code = await n.proc.exited;
    n.state = 'down';
    return code;
  }

  /** SIGSTOP: the process is frozen (its sockets stay open, nothing answers). */
  stop(id: string): void {
    const n = this.node(id);
    n.proc.child.kill('SIGSTOP');
    n.state = 'stopped';
  }

  cont(id: string): void {
    const n = this.node(id);
    n.proc.child.kill('SIGCONT');
    n.state = 'running';
  }

  /** The account's lease made expired on PostgreSQL's clock (its owner's next renewal finds it gone:
   *  lost, 'revoked'), as a lease looks when its owner's renewals did not land in time. */
  async expireLease(accountId: string): Promise<void> {
    await this.db.query(`UPDATE account_leases SET expires_at = now() - interval '1 millisecond' WHERE account_id = $1`, [accountId]);
  }

  /** The lease row of an account, as PostgreSQL (the truth) has it. */
  async lease(accountId: string): Promise<LeaseRow> {
    const r = await this.db.query<{ owner: string | null; epoch: string; live: boolean }>(
      'SELECT owner, epoch, (owner IS NOT NULL AND expires_at > now()) AS live FROM account_leases WHERE account_id = $1', [accountId]);
    const row = r.rows[0];
    return row ? { owner: row.owner, epoch: Number(row.epoch), live: row.live } : { owner: null, epoch: 0, live: false };
  }

  /** The account's idempotency records in PostgreSQL: the epoch of the lease under which each was
   *  last written (fencing: never one older than the lease at the time). */
  async claims(accountId: string): Promise<Array<{ clientOrderId: string; state: string; epoch: number }>> {
    const r = await this.db.query<{ client_order_id: string; state: string; epoch: number }>(
      'SELECT client_order_id, state, epoch FROM idempotency WHERE account_id = $1 ORDER BY client_order_id', [accountId]);
    return r.rows.map((row) => ({ clientOrderId: row.client_order_id, state: row.state, epoch: Number(row.epoch) }));
  }

  /** Waits until the account has a live owner (other than `not`, when given) and returns it. */
  async owner(accountId: string, opts: { not?: string; limitMs?: number } = {}): Promise<LeaseRow & { owner: string }> {
    let row: LeaseRow | undefined;
    await until(async () => {
      row = await this.lease(accountId).catch(() => undefined);
      return !!row?.live && row.owner !== opts.not;
    }, `a live owner of ${accountId}${opts.not ? ` other than ${opts.not}` : ''} (last: ${JSON.stringify(row)})`, opts.limitMs ?? 20_000);
    return row as LeaseRow & { owner: string };
  }

  /** Node `id`'s takeovers now, as its /v1/status (`cluster.leases`) and its /metrics
   *  (`tagw_cluster_takeovers_total{reason}`) say them. */
  async takeovers(id: string): Promise<{ status: { takeovers: number; takeoversExpired: number; takeoversHandover: number }; metrics: Record<string, number> }> {
    const headers = { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}` };
    const { url } = this.node(id);
    const status = (await (await fetch(`${url}/v1/status`, { headers })).json()) as { cluster: { leases: { takeovers: number; takeoversExpired: number; takeoversHandover: number } } };
    const text = await (await fetch(`${url}/metrics`, { headers })).text();
    const metrics = Object.fromEntries([...text.matchAll(/^tagw_cluster_takeovers_total\{reason="(\w+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
    const { takeovers, takeoversExpired, takeoversHandover } = status.cluster.leases;
    return { status: { takeovers, takeoversExpired, takeoversHandover }, metrics };
  }

  /** The account's live owner and the other running nodes. */
  async roles(accountId: string): Promise<{ owner: string; others: string[] }> {
    const { owner } = await this.owner(accountId);
    return { owner, others: this.running().map((n) => n.id).filter((id) => id !== owner) };
  }

  /**
   * A new simulator login as an account of the cluster, with an API key for it, written to
   * PostgreSQL (the cluster's tenancy record: seat, seat state, binding with the password sealed by
   * the shared key, key hash), then announced as a node announces its own tenancy write of a new
   * account (clusterTenancy.ts: every node mirrors at once and runs a lease round). Waits until a
   * node owns the account and every running node serves it with that key (their mirrors copied the rows).
   * `server`: the simulator server of the login (Sim-P5-Demo unless given); `login`: its login is
   * `<prefix>-<login>` (a login given simFaults) rather than the next number.
   */
  async account(server: SimServer = 'Sim-P5-Demo', opts: { login?: string } = {}): Promise<ClusterAccount> {
    const login = `${this.prefix}-${opts.login ?? ++this.logins}`;
    const id = randomUUID();
    const key = generateKey('api');
    const now = Date.now();
    const t = new PgTenancy(this.db);
    await t.insertSeat({ id, customer_id: this.customerId, private_hosting: 0, region: null, created_at: now });
    await t.upsertSeatState({ seat_id: id, status: 'ACTIVE', ready_at: now, updated_at: now });
    await t.upsertBinding({
      seat_id: id, customer_id: this.customerId, platform: SIM_SERVERS[server], server, login,
      password_enc: new SecretBox(Buffer.from(SECRET_KEY, 'hex')).seal('pw', id), build: null, created_at: now, updated_at: now,
    });
    await t.insertKey({ id: key.id, customer_id: this.customerId, kind: 'api', hash: hashSecret(key.secret), label: login, read_only: 0, account_scoped: 0, seat_id: null, created_at: now });
    await this.announce({ nudge: true });
    const acct = { id, key: key.value, login, server };
    await this.owner(id);
    // Every node at once: their mirrors copy the rows independently.
    await Promise.all(this.running().map(async (n) => {
      // The key first, through the management key: polling with a key not mirrored yet would count
      // as failed authentications and get this address throttled.
      const keyIds = async () => ((await (await fetch(`${n.url}/v1/keys?kind=api`, { headers: { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}` } })).json()) as { keys?: Array<{ id: string }> }).keys?.map((k) => k.id) ?? [];
      await until(async () => (await keyIds()).includes(key.id), `${n.id} to mirror the key of ${id}`, 20_000);
      let last = '';
      await until(async () => {
        const r = await fetch(`${n.url}/AccountSummary?id=${id}`, { headers: { 'x-api-key': acct.key } });
        last = `${r.status} ${await r.text()}`;
        if (r.status !== 200) await sleep(200);
        return r.status === 200;
      }, `${n.id} to serve ${id}`, 20_000).catch(async (err: Error) => {
        throw new Error(`${err.message}; last answer ${last}; lease now ${JSON.stringify(await this.lease(id))}`);
      });
    }));
    return acct;
  }

  /** A tenancy notice to the running nodes, as ClusterTenancy tells the others of its writes, waiting
   *  (2 s at most) for each to answer that it mirrored. Not told, a node mirrors at its next pass
   *  (every second): so a notice that cannot be sent (NATS away) only costs time. */
  private async announce(notice: TenancyNotice): Promise<void> {
    const nodes = this.running().length;
    if (nodes === 0) return;
    const nc = await connect({ servers: this.engines.nats.url, timeout: 2_000, reconnect: false }).catch(() => undefined);
    if (!nc) return;
    try {
      const replies = await nc.requestMany(SUBJECTS.tenancy, JSON.stringify(notice), { strategy: 'count', maxMessages: nodes, maxWait: 2_000 });
      for await (const _ of replies) {
        // each: a node mirrored
      }
    } catch {
      // no answer in time: the nodes mirror at their next pass
    } finally {
      await nc.close().catch(() => undefined);
    }
  }

  /** The orders the broker executed for a login (the simulator's deal history, read over the bridge
   *  protocol directly, past every node), with the clientOrderId each carried in its comment. */
  async brokerOrders(login: string, server: SimServer = 'Sim-P5-Demo'): Promise<BrokerOrder[]> {
    return openedBy((await this.brokerBook({ login, server })).deals);
  }

  /** What the broker holds for an account, read over the bridge protocol directly, past every node:
   *  its deals, its orders that left the book, and its open positions and pending orders. */
  async brokerBook(acct: Pick<ClusterAccount, 'login' | 'server'>): Promise<BrokerBook> {
    const c = new BridgeBrokerConnection({ host: '127.0.0.1', port: this.sim.port, server: acct.server, login: acct.login, password: 'pw', requestTimeoutMs: 10_000 });
    await c.connect();
    try {
      const to = Date.now() + 7 * 86_400_000;
      const [deals, history, open] = await Promise.all([c.historyDeals(0, to), c.historyOrders(0, to), c.openedOrders()]);
      return { deals, history, positions: open.positions, orders: open.orders };
    } finally {
      await c.disconnect();
    }
  }

  async close(): Promise<void> {
    for (const n of this.nodes) if (n.state === 'stopped') this.cont(n.id);
    await Promise.all(this.nodes.filter((n) => n.state === 'running').map(async (n) => {
      n.proc.child.kill('SIGTERM');
      const gone = await Promise.race([n.proc.exited.then(() => true), sleep(8_000).then(() => false)]);
      if (!gone) n.proc.child.kill('SIGKILL');
      n.state = 'down';
    }));
    this.sim.proc.child.kill('SIGKILL');
    await this.db.end().catch(() => {});
  }
}

export interface ClusterAccount { id: string; key: string; login: string; server: SimServer }

export interface Readiness { ready: boolean; store: boolean; cluster?: { nats: boolean; database: boolean } }

/** A node's /readyz: its status and body (a 503 carries the same body, saying which part is down). */
export async function readyz(node: { url: string }): Promise<{ status: number; body: Readiness }> {
  const r = await fetch(`${node.url}/readyz`, { signal: AbortSignal.timeout(5_000) });
  return { status: r.status, body: await r.json() as Readiness };
}

async function startSim(prefix: string, opts: Pick<ClusterOptions, 'simFaults' | 'simServers' | 'simMarketHours'>): Promise<{ proc: GatewayProcess; port: number }> {
  const args = [builtEntry('src/simServer.ts'), '--port', '0', ...(opts.simMarketHours ? ['--market-hours', opts.simMarketHours] : [])];
  if (opts.simFaults || opts.simServers) {
    const config = JSON.parse(readFileSync(DEFAULT_CONFIG_PATH, 'utf8')) as SimConfigInput;
    if (opts.simFaults) config.servers.find((s) => s.name === 'Sim-P5-Demo')!.faults = opts.simFaults(prefix);
    opts.simServers?.(config);
    const file = join(mkdtempSync(join(tmpdir(), 'tagw-sim-config-')), 'sim-servers.json');
    writeFileSync(file, JSON.stringify(config));
    args.push('--config', file);
  }
  const proc = startProcess({}, undefined, args);
  let port = 0;
  await until(() => {
    if (proc.child.exitCode !== null) throw new Error(`simulator exited: ${proc.output()}`);
    const m = /"listening":(\d+)/.exec(proc.output());
    if (m) port = Number(m[1]);
    return port > 0;
  }, 'the simulator process to listen');
  return { proc, port };
}
