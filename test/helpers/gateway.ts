// Starts a real gateway (uWS on 127.0.0.1, port 0, its own temp data dir, real shard workers)
// and gives tests a small HTTP client for it.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../../src/auth/throttle.js';
import { parseConfig, type ConfigInput } from '../../src/config.js';
import { startGateway, type Gateway } from '../../src/gateway.js';
import { createLogger, type Logger } from '../../src/log.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { API_VERSION } from '../../src/http/routes/ops.js';
import { checkResponse } from './openapiCheck.js';
import { builtEntry } from './build.js';
import { TEST_SHARDS } from './testShards.js';

export { TEST_SHARDS };

/** Shard workers run from this run's build (helpers/build.ts): through tsx each one spent several
 *  times the CPU compiling the runtime before it was ready, and a test run starts hundreds. */
export const SHARD_WORKER = builtEntry('src/runtime/shardWorker.ts');
/** The WAL checkpointer's thread, from the build too: from the sources it registered tsx's loader
 *  first (~180 ms of CPU and ~370 ms before it answered, against ~35 ms and ~50 ms). */
export const CHECKPOINT_WORKER = builtEntry('src/store/checkpointWorker.ts');
const DOWNABLE_SHARD_WORKER = fileURLToPath(new URL('./downableShard.mjs', import.meta.url));
/** What downableShard.mjs reads at every start: the real worker, and the shards kept down. */
const downableShards = (dataDir: string) => join(dataDir, 'test-shards.json');
function setShardsDown(dataDir: string, change: (down: number[]) => number[]): void {
  const file = downableShards(dataDir);
  const cfg = JSON.parse(readFileSync(file, 'utf8')) as { worker: string; down: number[] };
  writeFileSync(file, JSON.stringify({ ...cfg, down: change(cfg.down) }));
}

export interface TestGateway {
  gw: Gateway;
  url: string;
  dataDir: string;
  managementKey: string;
  req(method: string, path: string, opts?: { headers?: Record<string, string>; body?: unknown; rawBody?: string }): Promise<TestResponse>;
  stop(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export class ManualClock implements Clock {
  constructor(public t = Date.now()) {}
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

export const TEST_MANAGEMENT_KEY = 'test-management-key-0123456789abcdef';

/** The OpenAPI document of a route table, built once per distinct table (~40 ms of CPU each): every
 *  test gateway has the same routes, whose schemas are module constants that no setting changes. */
const openApiDocs = new Map<string, ReturnType<typeof buildOpenApi>>();
export function openApiOf(routes: Gateway['routes']): ReturnType<typeof buildOpenApi> {
  const key = routes.map((r) => `${r.method} ${r.path} ${r.summary}`).join('\n');
  let doc = openApiDocs.get(key);
  if (!doc) openApiDocs.set(key, (doc = buildOpenApi(routes, API_VERSION)));
  return doc;
}

/** One shard unless a test asks for more (`{ shards: 2 }`: a test of what spans shards, such as
 *  fan-out across them, a fault every shard takes, readiness counting them) or TAGW_TEST_SHARDS says
 *  so: a second shard thread cost ~0.2 CPU-s more per start (~0.42 against ~0.22 on the 2-vCPU
 *  machine), and most files start gateways per test. */
export async function startTestGateway(
  overrides: ConfigInput = {},
  opts: { clock?: Clock; dataDir?: string; log?: Logger; downableShards?: boolean } = {},
): Promise<TestGateway> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'tagw-test-'));
  // The shards run the real worker through downableShard.mjs, which keepShardDown can stop from starting.
  if (opts.downableShards) writeFileSync(downableShards(dataDir), JSON.stringify({ worker: SHARD_WORKER, down: [] }));
  const config = parseConfig({
    host: '127.0.0.1', port: 0, dataDir, shards: TEST_SHARDS, logLevel: 'silent', managementKey: TEST_MANAGEMENT_KEY,
    seatBuildMs: 300, drainTimeoutMs: 2_000, ...overrides,
  });
  const gwOpts: Parameters<typeof startGateway>[1] = { log: opts.log ?? createLogger('silent'), shardWorkerFile: opts.downableShards ? DOWNABLE_SHARD_WORKER : SHARD_WORKER, checkpointWorkerFile: CHECKPOINT_WORKER };
  if (opts.clock) gwOpts.clock = opts.clock;
  const gw = await startGateway(config, gwOpts);
  const url = `http://127.0.0.1:${gw.port}`;
  let doc: ReturnType<typeof buildOpenApi> | undefined;
  const req: TestGateway['req'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    let body: string | undefined;
    if (o.rawBody !== undefined) body = o.rawBody;
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const r = await fetch(url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await r.text();
    // Every response a test receives is one the OpenAPI document promises (helpers/openapiCheck.ts).
    checkResponse((doc ??= openApiOf(gw.routes)), method, path, r.status, r.headers.get('content-type'), text);
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: r.status, headers: r.headers, body: parsed, text };
  };
  return {
    gw, url, dataDir, managementKey: config.managementKey ?? gw.createdManagementKey ?? '',
    req,
    async stop() {
      await gw.close();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A gateway started with `downableShards`: every later start of the shard fails (kill it to take it
 *  down; the supervisor then restarts it for ever, never ready) until allowShardUp. */
export function keepShardDown(g: TestGateway, shard: number): void {
  setShardsDown(g.dataDir, (down) => [...down, shard]);
}

export function allowShardUp(g: TestGateway, shard: number): void {
  setShardsDown(g.dataDir, (down) => down.filter((s) => s !== shard));
}

export const mgmt = (key: string) => ({ authorization: `Bearer ${key}` });

/** Actors running in a gateway's shards (accounts, sessions, records): what it started. */
export async function shardActors(g: TestGateway): Promise<number> {
  const pings = await Promise.all(Array.from({ length: g.gw.services.shards.size }, (_, i) => g.gw.services.shards.callShard(i, 'shard.ping', {})));
  return pings.reduce((n, p) => n + p.actors, 0);
}
