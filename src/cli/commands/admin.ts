// tagw status and tagw mgmt-key rotate.
import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import type { Ctx } from '../context.js';
import { CliError, EXIT } from '../errors.js';
import { fields, table, when } from '../output.js';

interface Status {
  version: string; apiVersion: string; uptimeSec: number; startedAt: string; schemaVersion?: number;
  shards: Array<{ index: number; ready: boolean; restarts: number; accounts: number }>;
  seats: number; accounts: Record<string, number>;
  /** Cluster mode only (older gateways and single nodes: absent or null). */
  cluster?: ClusterStatus | null;
}

interface ClusterStatus {
  nodeId: string; ownedHere: number; unowned: number;
  /** Cut off from NATS while other nodes reach it: its accounts handed over (absent from older gateways). */
  steppedDown?: boolean;
  /** natsUp: at the node's last heartbeat (null: it did not say; absent from older gateways). */
  nodes: Array<{
    nodeId: string; live: boolean; accounts: number; heartbeatAgeMs?: number; natsUp?: boolean | null;
    /** The node's counters as of its last heartbeat (null: it did not say; absent from older gateways). */
    leases?: { lost: number; takeovers: number; takeoversExpired?: number } | null; calls?: { forwarded: number; served: number; unavailable: number } | null;
    /** The node's quote sessions as of its last heartbeat (null: it did not say; absent from older gateways). */
    quoteSessions?: QuoteSession[] | null;
  }>;
  /** This node's lease changes and calls between nodes (absent from older gateways). */
  leases?: { acquired: number; handedOver: number; lost: number; takeovers: number; takeoversExpired?: number; takeoversHandover?: number };
  calls?: { forwarded: number; served: number; unavailable: number; ownerWaits: number };
  /** This node's quote sessions now (QUOTE_LOGINS_FILE; absent from older gateways). */
  quoteSessions?: QuoteSession[];
}

interface QuoteSession { server: string; login: string; state: string; since: string; symbols: string[]; quotes: number; quotesFrom: string }

const duration = (s: number) => (s >= 86_400 ? `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3_600)}h` : s >= 3_600 ? `${Math.floor(s / 3_600)}h ${Math.floor((s % 3_600) / 60)}m` : s >= 60 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${s}s`);
const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/** How the takeovers' leases had ended (absent from older gateways): ran out (a node died) or handed over. */
const takeoverReasons = (l: NonNullable<ClusterStatus['leases']>) =>
  (l.takeovers > 0 && l.takeoversExpired !== undefined && l.takeoversHandover !== undefined ? ` (${l.takeoversExpired} expired, ${l.takeoversHandover} handed over)` : '');

/** The node and its live peers (cluster mode): the live list is read once. */
export function clusterFields(c: ClusterStatus): Array<[string, unknown]> {
  const live = c.nodes.filter((n) => n.live);
  const { leases: l, calls: k } = c;
  return [
    ['node', `${c.nodeId} (owns ${count(c.ownedHere, 'account')})`],
    ...(c.steppedDown ? [['stepped down', 'cut off from NATS, its accounts handed over until its link is back'] as [string, unknown]] : []),
    ['cluster', `${count(live.length, 'live node')}${live.length ? `: ${live.map((n) => `${n.nodeId} ${n.accounts}`).join(', ')}` : ''}; ${count(c.unowned, 'account')} without owner`],
    ...(l ? [['leases', `${l.acquired} acquired, ${l.handedOver} handed over, ${l.lost} lost; ${count(l.takeovers, 'takeover')}${takeoverReasons(l)}`] as [string, unknown]] : []),
    ...(k ? [['calls', `${k.forwarded} forwarded, ${k.served} served for other nodes, ${k.unavailable} unavailable, ${count(k.ownerWaits, 'owner wait')}`] as [string, unknown]] : []),
  ];
}

/** /readyz's body (its 503 carries the same): which parts are down. */
interface Readiness {
  ready: boolean; store?: boolean; shardsUp?: boolean;
  /** `reason`, `shardsWaiting` and `mainWaiting` from gateways that have them. */
  storage?: { available: boolean; reason?: string; shardsWaiting?: Array<{ shard: number; what: string }>; mainWaiting?: { what: string } };
  /** Cluster mode only (absent from older gateways). */
  cluster?: { nats: boolean; database: boolean };
}

/** /readyz said not ready without naming a part (a newer gateway's part this build does not know). */
const UNNAMED = '/readyz answered not ready';

/**
 * What keeps the gateway from being ready, in words (empty: ready): the parts /readyz reports down,
 * the shards not up by index (from /v1/status), and a cluster node that stepped down, whose /readyz
 * may say ready again before its next lease round takes accounts back. `tagw status` exits 7 with
 * these on one line.
 */
export function notReady(r: Readiness | undefined, st: { shards?: Status['shards']; cluster?: ClusterStatus | null } = {}): string[] {
  if (!r) return ['/readyz did not answer'];
  const shardsDown = (st.shards ?? []).filter((s) => !s.ready).map((s) => s.index);
  const down = [
    r.store === false && 'store closed',
    r.shardsUp === false && (shardsDown.length > 0 ? `${shardsDown.length === 1 ? 'shard' : 'shards'} ${shardsDown.join(', ')} not up (starting or restarting)` : 'a shard down'),
    r.storage?.available === false && 'disk full',
    r.cluster?.nats === false && 'NATS unreachable', r.cluster?.database === false && 'PostgreSQL unreachable',
    st.cluster?.steppedDown === true && 'stepped down (its accounts handed over to other nodes)',
  ].filter((x): x is string => typeof x === 'string');
  return down.length === 0 && !r.ready ? [UNNAMED] : down;
}

/** A full disk in words: why, and which shards' background writes wait (docs/storage.md); null when it has room. */
export function diskLine(storage: Readiness['storage']): string | null {
  if (!storage || storage.available) return null;
  const waiting = (storage.shardsWaiting ?? []).map((w) => `shard ${w.shard} (${w.what})`);
  if (storage.mainWaiting) waiting.push(`main thread (${storage.mainWaiting.what})`);
  return `full${storage.reason ? ` (${storage.reason})` : ''}${waiting.length > 0 ? `; background writes wait in memory: ${waiting.join(', ')}` : ''}`;
}

/** `yes`, or `no` with what keeps it from being ready (a gateway that did not answer: unreachable). */
export function readinessLine(r: Readiness | undefined, st: Parameters<typeof notReady>[1] = {}): string {
  if (!r) return 'no (no answer)';
  const down = notReady(r, st);
  if (down.length === 0) return 'yes';
  return down[0] === UNNAMED ? 'no' : `no (${down.join(', ')})`;
}

const heartbeatAge = (ms: number | undefined) => (ms === undefined ? null : ms < 60_000 ? `${(ms / 1000).toFixed(1)}s ago` : `${duration(Math.round(ms / 1000))} ago`);

/** A live node's NATS link as its last heartbeat said (a down node's is stale: not shown). */
const natsCell = (n: ClusterStatus['nodes'][number]) => (n.live && typeof n.natsUp === 'boolean' ? (n.natsUp ? 'up' : 'down') : null);

/** Every node PostgreSQL knows of (cluster mode), this one marked, with what each did since its
 *  start as its last heartbeat said (a down node's: up to its last one; '-': it did not say). */
export function clusterNodesTable(c: ClusterStatus): string {
  return `Nodes:\n${table(c.nodes, [
    { header: 'NODE', value: (n) => (n.nodeId === c.nodeId ? `${n.nodeId} (this node)` : n.nodeId) }, { header: 'STATE', value: (n) => (n.live ? 'live' : 'down') },
    { header: 'NATS', value: natsCell }, { header: 'ACCOUNTS', value: (n) => n.accounts }, { header: 'HEARTBEAT', value: (n) => heartbeatAge(n.heartbeatAgeMs) },
    { header: 'TAKEOVERS', value: (n) => n.leases?.takeovers ?? null }, { header: 'EXPIRED', value: (n) => n.leases?.takeoversExpired ?? null },
    { header: 'LOST', value: (n) => n.leases?.lost ?? null },
    { header: 'FORWARDED', value: (n) => n.calls?.forwarded ?? null }, { header: 'SERVED', value: (n) => n.calls?.served ?? null },
    { header: 'UNAVAILABLE', value: (n) => n.calls?.unavailable ?? null },
  ])}`;
}

/** A quote session's symbols: how many, and the first three. */
const symbolsCell = (s: readonly string[]) => (s.length === 0 ? '0' : `${s.length} (${s.slice(0, 3).join(', ')}${s.length > 3 ? `, and ${s.length - 3} more` : ''})`);

/** The live nodes' quote sessions (QUOTE_LOGINS_FILE): this node's now, the others' as their last
 *  heartbeat said (a down node's are stale: not shown). Empty when no node has one. */
export function quoteSessionsTable(c: ClusterStatus): string {
  const rows = c.nodes.flatMap((n) => (!n.live ? [] : n.nodeId === c.nodeId ? c.quoteSessions ?? n.quoteSessions ?? [] : n.quoteSessions ?? [])
    .map((q) => ({ node: n.nodeId === c.nodeId ? `${n.nodeId} (this node)` : n.nodeId, ...q })));
  if (rows.length === 0) return '';
  return `Quote sessions:\n${table(rows, [
    { header: 'NODE', value: (r) => r.node }, { header: 'SERVER', value: (r) => r.server }, { header: 'LOGIN', value: (r) => r.login },
    { header: 'STATE', value: (r) => r.state }, { header: 'SINCE', value: (r) => when(r.since) }, { header: 'SYMBOLS', value: (r) => symbolsCell(r.symbols) },
    { header: 'QUOTES', value: (r) => r.quotes }, { header: 'FROM', value: (r) => r.quotesFrom },
  ])}`;
}

/** The schema version of DATA_DIR's database, read-only (null: no database); loads the store only here. */
async function schemaVersionOnDisk(dataDir: string): Promise<number | null> {
  const [{ dbPath }, { checkMigrations }] = await Promise.all([import('../../store/db.js'), import('../../store/migrations.js')]);
  const file = dbPath(dataDir);
  return existsSync(file) ? checkMigrations(file).current : null;
}

export function statusCommand(program: Command, ctx: () => Promise<Ctx>): void {
  program.command('status').description('health, version, schema version, shards, accounts by connection state').action(async () => {
    const c = await ctx();
    const client = c.client();
    const health = await client.call<{ status: string }>('GET', '/healthz', undefined, { auth: false });
    // 503 while not ready: its body says why.
    const readiness = await client.call<Readiness>('GET', '/readyz', undefined, { auth: false, accept: [503] }).catch(() => undefined);
    const st = await client.call<Status>('GET', '/v1/status').catch((e: unknown) => {
      // A cluster node cut off from PostgreSQL answers /v1/status (which reads it) with 503 as well:
      // it is not ready, as /readyz says (7), not a gateway that refused (1). What could be read is shown.
      const down = notReady(readiness);
      if (!(e instanceof CliError) || e.exitCode !== EXIT.FAILED || !readiness || down.length === 0) throw e;
      c.out.print({ url: client.url, health: health.status, ready: false, notReady: down, ...(readiness.cluster ? { clusterReady: readiness.cluster } : {}) }, (d) => fields([
        ['gateway', d.url], ['health', d.health], ['ready', readinessLine(readiness)], ['status', `not available: ${e.message}`],
      ]));
      throw new CliError(EXIT.NOT_READY, `not ready: ${down.join(', ')}`);
    });
    // An older gateway's status has no schema version: the database file says it (read-only).
    const schemaVersion = st.schemaVersion ?? await schemaVersionOnDisk(c.config().dataDir);
    const down = notReady(readiness, st);
    const disk = diskLine(readiness?.storage);
    const data = { url: client.url, health: health.status, ready: down.length === 0, notReady: down, ...(readiness?.cluster ? { clusterReady: readiness.cluster } : {}), ...st, schemaVersion };
    c.out.print(data, (d) => fields([
      ['gateway', d.url], ['health', d.health], ['ready', readinessLine(readiness, st)], ...(disk ? [['disk', disk] as [string, unknown]] : []),
      ['version', `${d.version} (API ${d.apiVersion})`],
      ['schema version', d.schemaVersion], ['up since', `${when(d.startedAt)} (${duration(d.uptimeSec)})`], ['seats', d.seats],
      ['accounts', Object.entries(d.accounts).map(([phase, n]) => `${n} ${phase}`).join(', ') + (d.cluster ? ' (on this node; the others on theirs)' : '')],
      ...(d.cluster ? clusterFields(d.cluster) : []),
    ]) + `\nShards:\n${table(d.shards, [
      { header: 'SHARD', value: (s) => s.index }, { header: 'STATE', value: (s) => (s.ready ? 'up' : 'down') },
      { header: 'RESTARTS', value: (s) => s.restarts }, { header: 'ACCOUNTS', value: (s) => s.accounts },
    ])}${d.cluster ? clusterNodesTable(d.cluster) + quoteSessionsTable(d.cluster) : ''}`);
    // `tagw status && deploy-next`: a gateway that answers but is not ready is no success.
    if (down.length > 0) throw new CliError(EXIT.NOT_READY, `not ready: ${down.join(', ')}`);
  });
}

export function mgmtKeyCommand(program: Command, ctx: () => Promise<Ctx>): void {
  const mk = program.command('mgmt-key').description('the management key');
  mk.command('rotate').description('a new management key (shown once); the one used now stops working at once')
    .option('--label <label>', "the new key's label")
    .action(async (o: { label?: string }) => {
      const c = await ctx();
      const r = await c.client().call('POST', '/v1/management-key/rotate', o.label ? { label: o.label } : {});
      // An older gateway does not say whether it rewrote bootstrap.json.
      const file = r.bootstrapFileUpdated === true ? "the gateway's DATA_DIR/bootstrap.json now holds the new key"
        : r.bootstrapFileUpdated === false ? "the gateway's DATA_DIR/bootstrap.json did not hold the old key and is unchanged: store this one where you keep it"
          : 'DATA_DIR/bootstrap.json is updated when it held the old key';
      c.out.revealSecret(r, `New management key ${r.id} (${r.revoked} is revoked; ${file}):`);
    });
}
