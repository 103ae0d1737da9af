// Quote sessions (docs/cluster.md "Quote sessions"): a node whose sockets follow a symbol of a server
// no account running on it is of takes the quotes from a session of its own with the server's
// market-data login (QUOTE_LOGINS_FILE), the owner's relay staying the fallback. Real nats-server
// and PostgreSQL, one simulator over loopback TCP, in-process gateways; one account X, owned by
// node a. Node b's NATS user may not subscribe the market subjects (`tagw.md.>`): the owner's relayed
// copies never reach it, so every quote b's socket gets comes from its quote session. Node c reaches
// them: its quote session and the relay together, then the session muted and dropped at the
// simulator. Node d's quote login has a wrong password: one warning, quotes over the relay. What the
// operator sees follows each: /v1/status's and /metrics' quote sessions (state, login, symbols,
// quotes, session or relay), every node's in any node's status, and `tagw status`'s table.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { QuoteSessionStatus } from '../../src/cluster/nodeCounters.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { shareRankOf } from '../../src/cluster/rendezvous.js';
import { runPgMigrations } from '../../src/cluster/pgMigrations.js';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { PgTenancy } from '../../src/cluster/pgTenancy.js';
import { createLogger } from '../../src/log.js';
import { ownerConnected, seedBoundAccount } from '../helpers/cluster.js';
import { createDatabase, startNats, type Engine } from '../helpers/engines.js';
import { natsUserUrl, natsUsersConf, type NatsUser } from '../helpers/natsUsers.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { runBuiltCli } from '../helpers/build.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

const SERVER = 'Sim-P5-Demo';
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const x = randomUUID();
/** Node a's id: one the lease plan gives the larger share before the three others, so with one
 *  account it keeps X as they join. */
const A = (() => {
  const others = Math.max(...['node-b', 'node-c', 'node-d'].map(shareRankOf));
  for (let i = 0; ; i++) if (shareRankOf(`node-a${i}`) > others) return `node-a${i}`;
})();
const WRONG = 'wrong-quote-password-3f9c';
const nodes: TestGateway[] = [];
/** Every log line of the nodes' main threads. */
const logs: string[] = [];
let sim: BridgeSim;
let nats: Engine;
let pg: Engine;
let pool: PgPool;
let databaseUrl = '';
let natsUrl = (user: NatsUser) => user as string;
let a: TestGateway;

function quoteLogins(login: string, password: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'tagw-quote-logins-')), 'quote-logins.json');
  writeFileSync(file, JSON.stringify({ [SERVER]: { login, password } }), { mode: 0o600 });
  return file;
}

async function startNode(nodeId: string, natsUser: NatsUser, quoteLoginsFile?: string): Promise<TestGateway> {
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: sim.url, shards: 1, secretKey: secretKey.toString('hex'),
    natsUrl: natsUrl(natsUser), databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterOwnerWaitMs: 5_000,
    reconnectBaseMs: 100, reconnectCapMs: 500,
    ...(quoteLoginsFile ? { quoteLoginsFile } : {}),
  }, { log: createLogger('info', { node: nodeId }, (l) => logs.push(l)) });
  nodes.push(gw);
  return gw;
}

async function metric(node: TestGateway, re: RegExp): Promise<number> {
  return Number(re.exec(await (await fetch(`${node.url}/metrics`)).text())?.[1] ?? 0);
}
const quotesIn = (node: TestGateway, path: 'local' | 'relay') => metric(node, new RegExp(`^tagw_stream_quotes_in_total\\{path="${path}"\\} (\\d+)`, 'm'));
const followed = (node: TestGateway, source: 'near' | 'quote' | 'relay_only') => metric(node, new RegExp(`^tagw_cluster_followed_symbols\\{source="${source}"\\} (\\d+)`, 'm'));

interface Status { quoteSessions: QuoteSessionStatus[]; nodes: Array<{ nodeId: string; quoteSessions: QuoteSessionStatus[] | null }> }
async function clusterStatus(node: TestGateway): Promise<Status> {
  const r = await node.req('GET', '/v1/status', { headers: mgmt(node.managementKey) });
  expect(r.status).toBe(200);
  expect(JSON.stringify(r.body)).not.toMatch(/feed-pw|wrong-quote-password/);
  return r.body.cluster as Status;
}
/** The node's one quote session as /v1/status shows it now (undefined: none). */
async function session(node: TestGateway): Promise<QuoteSessionStatus | undefined> {
  const q = (await clusterStatus(node)).quoteSessions;
  expect(q.length).toBeLessThanOrEqual(1);
  return q[0];
}
/** /metrics' quote session series of SERVER: `state` (the one at 1, with its login), symbols, quotes, relay. */
async function sessionMetrics(node: TestGateway): Promise<{ state?: string; login?: string; states: number; symbols?: number; quotes?: number; relay?: number }> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  expect(text).not.toMatch(/feed-pw|wrong-quote-password/);
  const lines = text.split('\n').filter((l) => l.startsWith('tagw_cluster_quote_session') && l.includes(`server="${SERVER}"`));
  const num = (name: string) => {
    const l = lines.find((x) => x.startsWith(`${name}{`));
    return l === undefined ? undefined : Number(l.slice(l.lastIndexOf(' ') + 1));
  };
  const states = lines.filter((l) => l.startsWith('tagw_cluster_quote_session_state{'));
  const on = states.find((l) => l.endsWith(' 1'));
  return {
    states: states.length, state: /state="(\w+)"/.exec(on ?? '')?.[1], login: /login="([^"]+)"/.exec(on ?? '')?.[1],
    symbols: num('tagw_cluster_quote_session_symbols'), quotes: num('tagw_cluster_quote_session_quotes_total'), relay: num('tagw_cluster_quote_session_relay'),
  };
}

/** No quote twice, and the topic's seqs one after another. */
function expectWhole(quotes: Frame[]): void {
  const keys = quotes.map((f) => JSON.stringify([f.data.bid, f.data.ask, f.data.timeMsc]));
  expect(new Set(keys).size).toBe(keys.length);
  for (let i = 1; i < quotes.length; i++) expect(quotes[i]!.seq).toBe(quotes[i - 1]!.seq + 1);
}

async function follow(node: TestGateway): Promise<StreamClient> {
  const sock = await mustOpen(node.url, { id: x, heartbeat: '0' }, { 'x-api-key': apiKey.value });
  await sock.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
  sock.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await sock.next('SUBSCRIBED', 0, 15_000);
  return sock;
}

beforeAll(async () => {
  let natsEngine: Engine;
  [sim, natsEngine, pg] = await Promise.all([startBridgeSim(), startNats({ args: ['-c', natsUsersConf()] }), sharedPostgres()]);
  nats = natsEngine;
  natsUrl = (user) => natsUserUrl(nats.port, user);
  databaseUrl = await createDatabase(pg.url);
  pool = openPgPool(databaseUrl);
  await runPgMigrations(pool, databaseUrl);
  await seedBoundAccount(new PgTenancy(pool), { apiKey, account: x, login: 'qs-x', secretKey });
  // a first: it takes X, and keeps it as the others join.
  a = await startNode(A, 'node');
  await until(() => a.gw.cluster!.owned().includes(x), 'a to own X', 30_000);
  await ownerConnected([a], x, A);
}, 120_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
  await pool?.end();
  await sim?.close();
  await Promise.all([nats?.stop(), pg?.stop()]);
}, 60_000);

describe('a quote session', () => {
  it('serves a node that runs no account of the server: its socket on an account owned elsewhere gets every quote, none from the relay', async () => {
    const b = await startNode('node-b', 'nomd', quoteLogins('qs-feed-b', 'feed-pw'));
    await until(() => b.gw.cluster!.liveNodes().length === 2, 'b live', 20_000);
    expect(b.gw.cluster!.owned()).toEqual([]);
    const sock = await follow(b);
    try {
      await sock.until((c) => c.of('QUOTE').length >= 10, 20_000, 'ten quotes on b');
      expectWhole(sock.of('QUOTE'));
      expect(await quotesIn(b, 'local')).toBeGreaterThanOrEqual(10);
      expect(await quotesIn(b, 'relay')).toBe(0);
      expect(await followed(b, 'quote')).toBe(1);
      expect(await followed(b, 'near')).toBe(0);
      expect(b.gw.cluster!.owned()).toEqual([]);

      // What the operator sees: the session up, its login (never the password), the symbol, the
      // quotes it received, and the node taking them from it alone (the relay never reaches b).
      await until(async () => (await session(b))?.quotesFrom === 'session', "b's status to show its quotes from the session", 20_000);
      const shown = (await session(b))!;
      expect(shown).toMatchObject({ server: SERVER, login: 'qs-feed-b', state: 'up', symbols: ['BTCUSD'], quotesFrom: 'session' });
      // Ten on the socket: the first may be the subscribe's answer (the latest price), the rest the session's.
      expect(shown.quotes).toBeGreaterThanOrEqual(9);
      expect(Date.parse(shown.since)).toBeGreaterThan(0);
      await until(async () => (await sessionMetrics(b)).relay === 0, "b's /metrics to show the session", 20_000);
      const m = await sessionMetrics(b);
      expect(m).toMatchObject({ state: 'up', login: 'qs-feed-b', states: 4, symbols: 1, relay: 0 });
      expect(m.quotes).toBeGreaterThanOrEqual(shown.quotes);
      // Node a runs no quote session; its status shows b's as b's heartbeat wrote them.
      expect((await clusterStatus(a)).quoteSessions).toEqual([]);
      expect((await sessionMetrics(a)).states).toBe(0);
      await until(async () => (await clusterStatus(a)).nodes.find((n) => n.nodeId === 'node-b')?.quoteSessions?.[0]?.state === 'up', "a's status to show b's session up", 20_000);

      // tagw status on b: the quote sessions table.
      const env: NodeJS.ProcessEnv = { ...process.env, TAGW_URL: b.url, GATEWAY_MANAGEMENT_KEY: b.managementKey };
      for (const k of ['TAGW_CONFIG', 'NATS_URL', 'DATABASE_URL', 'DATA_DIR']) delete env[k];
      const cli = await runBuiltCli(['status'], env);
      expect(cli.code, cli.stderr).toBe(0);
      expect(cli.stdout).toMatch(/^Quote sessions:\nNODE +SERVER +LOGIN +STATE +SINCE +SYMBOLS +QUOTES +FROM\nnode-b \(this node\) +Sim-P5-Demo +qs-feed-b +up +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +1 \(BTCUSD\) +\d+ +session$/m);
      expect(cli.stdout).not.toContain('feed-pw');
    } finally {
      await sock.close();
    }
    // The last socket gone: the session lets the symbol go (and closes: nothing else is followed).
    await until(async () => (await followed(b, 'quote')) === 0, 'b to let the quote session go', 20_000);
    await until(async () => (await session(b)) === undefined, "b's status to drop the closed session", 20_000);
    await until(async () => (await sessionMetrics(b)).states === 0, "b's /metrics to drop the closed session", 20_000);
  }, 120_000);

  it('with the relay reaching the node too: each quote once and in order, through quiet, the session muted, then dropped and back', async () => {
    const c = await startNode('node-c', 'node', quoteLogins('qs-feed-c', 'feed-pw'));
    await until(() => c.gw.cluster!.liveNodes().length >= 2, 'c live', 20_000);
    const sock = await follow(c);
    try {
      await sock.until((f) => f.of('QUOTE').length >= 5, 20_000, 'five quotes on c');
      await until(() => c.gw.cluster!.nearCounts().quiet === 1, 'c quiet for the symbol (its session keeps up)', 20_000);
      await until(() => a.gw.cluster!.status().relay.withheld >= 5, 'a to withhold ticks', 20_000);
      expect(await followed(c, 'quote')).toBe(1);
      await until(async () => (await session(c))?.quotesFrom === 'session', "c's status to show its quotes from the session", 20_000);
      expect(await session(c)).toMatchObject({ login: 'qs-feed-c', state: 'up', symbols: ['BTCUSD'] });

      // Muted at the broker (session up, no ticks): the owner's pulses show it behind, the relay's copies again.
      const stalls = c.gw.cluster!.nearCounts().stalls;
      const mute = sim.sim.faults.set({ server: SERVER, login: 'qs-feed-c', kind: 'mute', durationMs: 120_000 });
      try {
        await until(() => c.gw.cluster!.nearCounts().stalls > stalls, 'c to find its quote session behind', 20_000);
        const relayed = await quotesIn(c, 'relay');
        const n = sock.of('QUOTE').length;
        await sock.until((f) => f.of('QUOTE').length >= n + 5, 20_000, 'five quotes while muted');
        await until(async () => (await quotesIn(c, 'relay')) >= relayed + 3, 'quotes over the relay while muted', 20_000);
        // Up but behind: the status says the relay serves, and so does /metrics.
        expect(await session(c)).toMatchObject({ state: 'up', quotesFrom: 'relay' });
        await until(async () => (await sessionMetrics(c)).relay === 1, "c's /metrics to show the relay's fallback", 20_000);
      } finally {
        sim.sim.faults.clear(mute.id);
      }
      await until(() => c.gw.cluster!.nearCounts().quiet === 1, 'c quiet again once the session delivers', 20_000);
      await until(async () => (await session(c))?.quotesFrom === 'session', "c's status: from the session again", 20_000);
      const upSince = (await session(c))!.since;

      // Dropped at the broker for a while: quotes over the relay, then the session logs in again.
      const drop = sim.sim.faults.set({ server: SERVER, login: 'qs-feed-c', kind: 'drop', durationMs: 3_000 });
      try {
        const n = sock.of('QUOTE').length;
        await sock.until((f) => f.of('QUOTE').length >= n + 5, 20_000, 'five quotes while dropped');
        await until(async () => (await session(c))?.state === 'down', "c's status to show the session down", 20_000);
        expect(await session(c)).toMatchObject({ quotesFrom: 'relay', symbols: ['BTCUSD'] });
      } finally {
        sim.sim.faults.clear(drop.id);
      }
      await until(() => c.gw.cluster!.nearCounts().quiet === 1, 'c quiet again once the session is back', 30_000);
      await until(async () => (await session(c))?.quotesFrom === 'session', "c's status: the session up and serving again", 20_000);
      const back = (await session(c))!;
      expect(back.state).toBe('up');
      expect(Date.parse(back.since)).toBeGreaterThan(Date.parse(upSince));
      await until(async () => (await sessionMetrics(c)).relay === 0, "c's /metrics: from the session again", 20_000);
      expect(await sessionMetrics(c)).toMatchObject({ state: 'up', login: 'qs-feed-c' });
      const local = await quotesIn(c, 'local');
      const n = sock.of('QUOTE').length;
      await sock.until((f) => f.of('QUOTE').length >= n + 5, 20_000, 'five quotes after the drop');
      expect(await quotesIn(c, 'local')).toBeGreaterThan(local);
      expectWhole(sock.of('QUOTE'));
    } finally {
      await sock.close();
    }
  }, 150_000);

  it('a refused quote login: one warning, no password in any log line, the quotes over the relay', async () => {
    // The login exists at the broker with another password (b logged in with it first).
    const d = await startNode('node-d', 'node', quoteLogins('qs-feed-b', WRONG));
    await until(() => d.gw.cluster!.liveNodes().length >= 2, 'd live', 20_000);
    const sock = await follow(d);
    const sock2 = await mustOpen(d.url, { id: x, heartbeat: '0' }, { 'x-api-key': apiKey.value });
    try {
      await sock.until((f) => f.of('QUOTE').length >= 10, 20_000, 'ten quotes on d');
      expectWhole(sock.of('QUOTE'));
      // Over the relay (the first may be the subscribe's answer, the latest price), none from a session of d's.
      expect(await quotesIn(d, 'relay')).toBeGreaterThanOrEqual(9);
      const local = await quotesIn(d, 'local');
      const n = sock.of('QUOTE').length;
      await sock.until((f) => f.of('QUOTE').length >= n + 5, 20_000, 'five more quotes on d');
      expect(await quotesIn(d, 'local')).toBe(local);
      expect(await followed(d, 'quote')).toBe(0);
      expect(await followed(d, 'relay_only')).toBe(1);
      // Another symbol followed on d (quoting or not, whatever the day): asked again, refused at once, no second warning.
      sock2.send({ action: 'subscribe', symbol: 'EURUSD' });
      await sock2.next('SUBSCRIBED', 0, 15_000);
      await until(async () => (await followed(d, 'relay_only')) === 2, 'both symbols over the relay', 20_000);
      // The status: refused, its login (never the password), the symbols the relay serves instead.
      await until(async () => (await session(d))?.symbols.length === 2, "d's status to name both symbols", 20_000);
      expect(await session(d)).toMatchObject({ server: SERVER, login: 'qs-feed-b', state: 'refused', symbols: ['BTCUSD', 'EURUSD'], quotes: 0, quotesFrom: 'relay' });
      await until(async () => (await sessionMetrics(d)).state === 'refused', "d's /metrics to show the refusal", 20_000);
      expect(await sessionMetrics(d)).toMatchObject({ login: 'qs-feed-b', states: 4, symbols: 2, quotes: 0, relay: 1 });
      const warned = logs.filter((l) => l.includes('"node":"node-d"') && l.includes('quote login refused'));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain(SERVER);
      expect(logs.filter((l) => l.includes(WRONG) || l.includes('feed-pw'))).toEqual([]);
    } finally {
      await sock.close();
      await sock2.close();
    }
  }, 90_000);
});
