// `tagw status` against a cluster node that cannot reach PostgreSQL: its /readyz says so (503,
// cluster.database false) and its /v1/status, which reads the cluster database, answers 503 too.
// docs/cli.md promises exit 7 ("not ready: PostgreSQL unreachable") with what it could read; it
// exited 1 ("the gateway refused") and printed nothing (found by hand: PostgreSQL stopped under three nodes).
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/errors.js';
import { runBuiltCli } from '../helpers/build.js';

let server: Server;
let url = '';
beforeAll(async () => {
  // What a cluster node answers with PostgreSQL away (bodies as the gateway sends them).
  server = createServer((req, res) => {
    const send = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.url === '/healthz') return send(200, { status: 'ok' });
    if (req.url === '/readyz') return send(503, { ready: false, store: true, shards: 1, shardsUp: true, storage: { available: true }, cluster: { nats: true, database: false } });
    return send(503, { error: 'SERVICE_UNAVAILABLE', message: "the cluster's database (PostgreSQL) cannot be reached from this node; retry once it is back" });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  url = `http://127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('tagw status, cluster database unreachable', () => {
  it('exits 7 (not ready: PostgreSQL unreachable) and prints what it could read, not 1', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, TAGW_URL: url, GATEWAY_MANAGEMENT_KEY: 'k'.repeat(32) };
    for (const k of ['TAGW_CONFIG', 'NATS_URL', 'DATABASE_URL', 'DATA_DIR']) delete env[k];
    const run = await runBuiltCli(['status'], env);
    expect(run.code, run.stderr).toBe(EXIT.NOT_READY);
    expect(run.stderr.trim()).toBe('tagw: not ready: PostgreSQL unreachable');
    expect(run.stdout).toMatch(/^health: +ok$/m);
    expect(run.stdout).toMatch(/^ready: +no \(PostgreSQL unreachable\)$/m);
    expect(run.stdout).toMatch(/^status: +not available: GET \/v1\/status: 503 SERVICE_UNAVAILABLE/m);
    const json = await runBuiltCli(['--json', 'status'], env);
    expect(json.code).toBe(EXIT.NOT_READY);
    expect(JSON.parse(json.stdout)).toMatchObject({ ready: false, notReady: ['PostgreSQL unreachable'], clusterReady: { nats: true, database: false } });
  }, 60_000);
});
