// What a process loads at start: a module it does not need costs CPU at every start (gateways
// restarted by operators and tests, the CLI called from bots' scripts). Each process here is started
// with those modules refused (helpers/refuseImports.mjs): an import of one fails it.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { builtCli, builtEntry } from '../helpers/build.js';
import { cleanupProcesses, ROOT, startProcess } from '../helpers/process.js';

const REFUSE = ['--import', join(ROOT, 'test', 'helpers', 'refuseImports.mjs')];
const MK = 'start-imports-management-key-0123456789';
/** The entries as tsc wrote them: the test build's bundles (helpers/bundle.mjs) hold their packages,
 *  so no import of one would be seen. */
const MAIN = builtEntry('src/main.ts', { unbundled: true });

/** The built `tagw` with `refused` modules refused. */
function tagw(args: string[], refused: string, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...REFUSE, ...builtCli({ unbundled: true }), ...args], { env: { PATH: process.env.PATH, HOME: process.env.HOME, TAGW_REFUSE_IMPORTS: refused, ...env }, timeout: 30_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }));
  });
}

afterEach(cleanupProcesses);

describe('start imports', () => {
  it('a single-node gateway (no DATABASE_URL) loads neither pg nor NATS, nor xstate in its main thread, and serves', async () => {
    // xstate: the shards run the machines; the HTTP edge reads a seat's status from actors/seatStatus.ts.
    const p = startProcess({ TAGW_REFUSE_IMPORTS: 'pg,@nats-io/,xstate' }, undefined, [...REFUSE, MAIN]);
    const url = await p.listening;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(p.output()).not.toContain('refused import');
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 30_000);

  it('the refusal works: a process that imports a refused module fails, naming it', async () => {
    const p = startProcess({ TAGW_REFUSE_IMPORTS: 'better-sqlite3' }, undefined, [...REFUSE, MAIN]);
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toContain("refused import of 'better-sqlite3'");
  }, 30_000);

  it('tagw --help loads no store, PostgreSQL, NATS or configuration schema', async () => {
    const r = await tagw(['--help'], 'pg,@nats-io/,better-sqlite3,zod');
    expect(r.code, r.stderr).toBe(0);
    for (const c of ['status', 'keys', 'backup', 'migrate', 'calendar']) expect(r.stdout).toContain(`  ${c}`);
  }, 30_000);

  it('tagw status and migrate --check (single node) load neither pg nor NATS; status no store either', async () => {
    const p = startProcess({ GATEWAY_MANAGEMENT_KEY: MK });
    const url = await p.listening;
    const env = { TAGW_URL: url, DATA_DIR: p.dir, GATEWAY_MANAGEMENT_KEY: MK };
    const [status, migrate] = await Promise.all([
      tagw(['--json', 'status'], 'pg,@nats-io/,better-sqlite3', env),
      tagw(['--json', 'migrate', '--check'], 'pg,@nats-io/', env),
    ]);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ health: 'ok', ready: true });
    expect(JSON.parse(status.stdout).schemaVersion).toBeGreaterThan(0);
    expect(migrate.code, migrate.stderr).toBe(0);
    expect(JSON.parse(migrate.stdout)).toMatchObject({ tooNew: false, pending: [] });
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 30_000);
});
