// Quote sessions (docs/cluster.md "Quote sessions"): a node whose sockets follow a symbol of a server
// no account running on it is of takes the quotes from a session of its own with the server's
// market-data login (QUOTE_LOGINS_FILE), the owner's relay staying the fallback. Real nats-server
// and PostgreSQL, one simulator over loopback TCP, in-process gateways; one account X, owned by
// node a. Node b's NATS user may not subscribe the market subjects (`tagw.md.>`): the owner's relayed
// copies never reach it, so every quote b's socket gets comes from its quote session. Node c reaches
// them: its quote session and the relay together, then the session muted and dropped at the
// simulator. Node d's quote login has a wrong password: one warning, quotes over the relay.
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
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
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
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
    } finally {
      await sock.close();
    }
    // The last socket gone: the session lets the symbol go (and closes: nothing else is followed).
    await until(async () => (await followed(b, 'quote')) === 0, 'b to let the quote session go', 20_000);
  }, 90_000);

  it('with the relay reaching the node too: each quote once and in order, through quiet, the session muted, then dropped and back', async () => {
    const c = await startNode('node-c', 'node', quoteLogins('qs-feed-c', 'feed-pw'));
    await until(() => c.gw.cluster!.liveNodes().length >= 2, 'c live', 20_000);
    const sock = await follow(c);
    try {
      await sock.until((f) => f.of('QUOTE').length >= 5, 20_000, 'five quotes on c');
      await until(() => c.gw.cluster!.nearCounts().quiet === 1, 'c quiet for the symbol (its session keeps up)', 20_000);
      await until(() => a.gw.cluster!.status().relay.withheld >= 5, 'a to withhold ticks', 20_000);
      expect(await followed(c, 'quote')).toBe(1);

      // Muted at the broker (session up, no ticks): the owner's pulses show it behind, the relay's copies again.
      const stalls = c.gw.cluster!.nearCounts().stalls;
      const mute = sim.sim.faults.set({ server: SERVER, login: 'qs-feed-c', kind: 'mute', durationMs: 120_000 });
      try {
        await until(() => c.gw.cluster!.nearCounts().stalls > stalls, 'c to find its quote session behind', 20_000);
        const relayed = await quotesIn(c, 'relay');
        const n = sock.of('QUOTE').length;
        await sock.until((f) => f.of('QUOTE').length >= n + 5, 20_000, 'five quotes while muted');
        await until(async () => (await quotesIn(c, 'relay')) >= relayed + 3, 'quotes over the relay while muted', 20_000);
      } finally {
        sim.sim.faults.clear(mute.id);
      }
      await until(() => c.gw.cluster!.nearCounts().quiet === 1, 'c quiet again once the session delivers', 20_000);

      // Dropped at the broker for a while: quotes over the relay, then the session logs in again.
      const drop = sim.sim.faults.set({ server: SERVER, login: 'qs-feed-c', kind: 'drop', durationMs: 3_000 });
      try {
        const n = sock.of('QUOTE').length;
        await sock.until((f) => f.of('QUOTE').length >= n + 5, 20_000, 'five quotes while dropped');
      } finally {
        sim.sim.faults.clear(drop.id);
      }
      await until(() => c.gw.cluster!.nearCounts().quiet === 1, 'c quiet again once the session is back', 30_000);
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
