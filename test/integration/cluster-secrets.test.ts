// Cluster mode's secrets as an operator gives them: DATABASE_URL's password (a role of its own on the
// run's PostgreSQL), NATS_URL's user and password or token (nats-server started to require them),
// the management key, an API key and broker passwords. The node connects with them, and whatever is
// driven at it (a key check that fails, a refused broker password, malformed requests carrying a
// key, NATS going away and coming back, engines that refuse the node at start), none of them appears
// in its output (every log line), a response, its status or its metrics (docs/cluster.md, Settings;
// HELPERS.md: secrets never in responses, logs, URLs, errors).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runBuiltCli } from '../helpers/build.js';
import { startNats, type NatsEngine } from '../helpers/engines.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { cleanupProcesses, startProcess, type GatewayProcess } from '../helpers/process.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { until } from '../helpers/until.js';

afterEach(cleanupProcesses);

// With an @ the operator did not percent-encode: node-postgres reads the password to the last @, and
// so must whatever shows the address without it (the part after the first @ is a secret too).
const PG_PW_TAIL = `PgTail${randomBytes(6).toString('hex')}`;
const PG_PW = `PgPw-${randomBytes(6).toString('hex')}@${PG_PW_TAIL}`;
const NATS_USER = 'tagwnode';
const NATS_PW_TAIL = `NatsTail${randomBytes(6).toString('hex')}`;
const NATS_PW = `NatsPw-${randomBytes(6).toString('hex')}@${NATS_PW_TAIL}`;
const NATS_TOKEN = `NatsTok-${randomBytes(6).toString('hex')}`;
const MGMT = `tagw_m_${randomBytes(8).toString('hex')}_MgmtSecret${randomBytes(8).toString('hex')}`;
const BROKER_PW = `BrokerPw-${randomBytes(6).toString('hex')}`;
const BROKER_PW_WRONG = `BrokerWrong-${randomBytes(6).toString('hex')}`;
/** Every node's: one opens the broker passwords another sealed (the nodes share the database). */
const SECRET_KEY = randomBytes(32).toString('hex');

let sim: BridgeSim;
let nats: NatsEngine;
let tokenNats: NatsEngine;
let databaseUrl: string;
let pgPort: number;

beforeAll(async () => {
  [sim, nats, tokenNats] = await Promise.all([
    startBridgeSim(),
    startNats({ args: ['--user', NATS_USER, '--pass', NATS_PW] }),
    startNats({ args: ['--auth', NATS_TOKEN] }),
  ]);
  // A role of its own, with a password no other test uses, owning the node's database.
  const shared = await sharedPostgres();
  pgPort = shared.port;
  const role = `secrets_${process.pid}`;
  const db = `secrets_${process.pid}`;
  const c = new pg.Client(shared.url);
  await c.connect();
  try {
    await c.query(`CREATE ROLE ${role} LOGIN PASSWORD '${PG_PW}'`);
    await c.query(`CREATE DATABASE ${db} OWNER ${role}`);
  } finally {
    await c.end();
  }
  databaseUrl = `postgres://${role}:${PG_PW}@127.0.0.1:${pgPort}/${db}`;
}, 60_000);

afterAll(async () => {
  await Promise.all([sim?.close(), nats?.stop(), tokenNats?.stop()]);
});

const hostOf = (e: NatsEngine) => `127.0.0.1:${e.port}`;

function node(env: Record<string, string>): GatewayProcess {
  return startProcess({
    NATS_URL: `nats://${NATS_USER}:${NATS_PW}@${hostOf(nats)}`, DATABASE_URL: databaseUrl, BROKER_MODE: 'bridge', BRIDGE_URL: sim.url,
    GATEWAY_MANAGEMENT_KEY: MGMT, NODE_ID: `secrets-${randomBytes(3).toString('hex')}`, CLUSTER_SETTLE_MS: '0', LOG_LEVEL: 'debug', TAGW_SECRET_KEY: SECRET_KEY, ...env,
  });
}

/** Each secret found in `text`, by name. */
function secretsIn(text: string, extra: Record<string, string> = {}): string[] {
  const all: Record<string, string> = { PG_PW, PG_PW_TAIL, NATS_PW, NATS_PW_TAIL, NATS_TOKEN, MGMT, BROKER_PW, BROKER_PW_WRONG, ...extra };
  return Object.entries(all).filter(([, v]) => v !== '' && text.includes(v)).map(([k]) => k);
}

async function call(base: string, method: string, path: string, o: { headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; text: string; headers: string }> {
  const r = await fetch(base + path, { method, headers: o.headers, body: o.body, signal: AbortSignal.timeout(15_000) });
  return { status: r.status, text: await r.text(), headers: JSON.stringify([...r.headers]) };
}

describe('cluster mode keeps its secrets', () => {
  it('connects with NATS_URL\'s user and password; no secret in any answer, metric or log line, whatever is driven at it', async () => {
    const p = node({});
    const base = await p.listening;
    const json = { 'content-type': 'application/json' };
    const mk = { authorization: `Bearer ${MGMT}` };
    const seen: string[] = [];
    // What came back (not what was sent: the requests carry the secrets on purpose).
    const keep = (what: string, r: { status: number; text: string; headers: string }) => seen.push(`answer to ${what}: ${r.status} ${r.headers} ${r.text}`);

    const k = await call(base, 'POST', '/v1/keys', { headers: { ...mk, ...json }, body: JSON.stringify({ label: 'secrets' }) });
    expect(k.status, k.text).toBe(201);
    const key = JSON.parse(k.text).key as string;
    const api = { 'x-api-key': key };
    const bind = await call(base, 'POST', '/ConnectEx', { headers: { ...api, ...json }, body: JSON.stringify({ user: 'secrets-1', password: BROKER_PW, server: 'Sim-P5-Demo' }) });
    expect(bind.status, bind.text).toBe(200);
    const id = JSON.parse(bind.text).id as string;
    await until(async () => (await call(base, 'GET', `/AccountSummary?id=${id}`, { headers: api })).status === 200, 'the bound account to answer');

    // A refused broker password (the simulator's login exists with another one), a failed key check,
    // keys in places they do not belong, malformed bodies carrying them.
    const drive: Array<[string, string, { headers?: Record<string, string>; body?: string }]> = [
      ['POST', '/ConnectEx', { headers: { ...api, ...json }, body: JSON.stringify({ id, user: 'secrets-1', password: BROKER_PW_WRONG, server: 'Sim-P5-Demo' }) }],
      ['POST', '/v1/broker-accounts', { headers: { ...mk, ...json }, body: JSON.stringify({ platform: 'P5', user: 'secrets-1', password: BROKER_PW_WRONG, server: 'Sim-P5-Demo' }) }],
      ['GET', `/ConnectEx?user=secrets-2&password=${BROKER_PW_WRONG}&server=Nowhere-P5`, { headers: api }],
      ['GET', `/AccountSummary?id=${id}`, { headers: { 'x-api-key': `${key}x` } }],
      ['GET', `/AccountSummary?id=${id}&apiKey=${key}`, {}],
      ['GET', `/AccountSummary?id=${id}`, { headers: { 'x-api-key': MGMT } }],
      // A key pasted where an id belongs (revoking by the key's value rather than its id), or into a path.
      ['GET', `/v1/seats/${key}`, { headers: mk }],
      ['DELETE', `/v1/keys/${key}`, { headers: mk }],
      ['GET', `/${MGMT}`, { headers: mk }],
      ['GET', `/OpenedOrder?id=${id}&ticket=${key}`, { headers: api }],
      ['GET', `/GetQuote?id=${id}&symbol=${key}`, { headers: api }],
      ['POST', '/v1/keys', { headers: { ...mk, ...json }, body: `{"label":"${key}` }],
      ['POST', '/v1/broker-accounts', { headers: { ...mk, 'content-type': 'text/plain' }, body: `password=${BROKER_PW_WRONG}` }],
      ['POST', '/v1/broker-accounts', { headers: { ...mk, ...json }, body: JSON.stringify({ platform: 'P5', user: 7, password: BROKER_PW_WRONG }) }],
      ['GET', `/v1/proxy/AccountSummary?handle=${key}`, { headers: api }],
      ['GET', '/v1/status', { headers: mk }],
      ['GET', '/metrics', {}],
      ['GET', '/v1/audit', { headers: mk }],
      ['GET', '/v1/keys?kind=all', { headers: mk }],
    ];
    for (const [i, [method, path, o]] of drive.entries()) keep(`request #${i} (${method})`, await call(base, method, path, o));

    // NATS goes away and comes back: the node logs the loss and the return, answers meanwhile.
    await nats.stop();
    keep('during the NATS outage', await call(base, 'GET', `/AccountSummary?id=${id}`, { headers: api }));
    await nats.restart();
    await until(async () => (await call(base, 'GET', `/AccountSummary?id=${id}`, { headers: api })).status === 200, 'the node to serve again after NATS is back', 30_000);
    // The account is served here without NATS: ready again (tagw status exits 0) once the node's
    // NATS link is back, which can come later (CI: 'not ready: NATS unreachable', exit 7).
    await until(async () => (await call(base, 'GET', '/readyz')).status === 200, 'the node ready again (its NATS link back)', 30_000);
    keep('status after the outage', await call(base, 'GET', '/v1/status', { headers: mk }));
    // The operator's view: tagw status (text and --json), keys list, with the management key and a
    // TAGW_URL that carries a user and password of its own.
    const cliEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, TAGW_URL: base.replace('//', `//op:${NATS_PW}@`), GATEWAY_MANAGEMENT_KEY: MGMT };
    for (const args of [['status'], ['status', '--json'], ['keys', 'list', '--kind', 'all']]) {
      const r = await runBuiltCli(args, cliEnv);
      seen.push(`tagw ${args.join(' ')}: ${r.code} ${r.stdout} ${r.stderr}`);
      expect(r.code, `tagw ${args.join(' ')}: ${r.stderr}`).toBe(0);
    }

    p.child.kill('SIGTERM');
    await p.exited;
    const text = `${seen.join('\n')}\n${p.output()}`;
    expect(p.output()).toMatch(/"msg":"connected to NATS"/);
    const leaks = text.split('\n').filter((l) => secretsIn(l, { key }).length > 0);
    expect(leaks.map((l) => `${secretsIn(l, { key }).join(',')}: ${l.slice(0, 600)}`)).toEqual([]);
  }, 120_000);

  it('connects with a NATS token in NATS_URL', async () => {
    const p = node({ NATS_URL: `nats://${NATS_TOKEN}@${hostOf(tokenNats)}` });
    const base = await p.listening;
    expect((await call(base, 'GET', '/healthz')).status).toBe(200);
    p.child.kill('SIGTERM');
    await p.exited;
    expect(secretsIn(p.output())).toEqual([]);
  }, 60_000);

  it('NATS or PostgreSQL refusing the node at start: exit 1, one line naming the server and the refusal, never the password', async () => {
    for (const [env, line] of [
      [{ NATS_URL: `nats://${NATS_USER}:${NATS_PW}x@${hostOf(nats)}` }, new RegExp(`^fatal: cannot connect NATS ${hostOf(nats)}: .*Authorization Violation`, 'i')],
      [{ NATS_URL: `nats://${NATS_TOKEN}x@${hostOf(tokenNats)}` }, new RegExp(`^fatal: cannot connect NATS ${hostOf(tokenNats)}: .*Authorization Violation`, 'i')],
      [{ DATABASE_URL: databaseUrl.replace(PG_PW, `${PG_PW}x`) }, new RegExp(`^fatal: cannot connect PostgreSQL postgres://127.0.0.1:${pgPort}/secrets_\\d+: password authentication failed`)],
    ] as Array<[Record<string, string>, RegExp]>) {
      const p = node({ ...env, LOG_LEVEL: 'error' });
      expect(await p.exited, p.output()).toBe(1);
      const lines = p.output().trim().split('\n');
      expect(lines, p.output()).toHaveLength(1);
      expect(lines[0]).toMatch(line);
      expect(secretsIn(p.output())).toEqual([]);
    }
  }, 90_000);
});
