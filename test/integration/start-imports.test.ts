// What a process loads at start: a module it does not need costs CPU at every start (gateways
// restarted by operators and tests, the CLI called from bots' scripts). Each process here is started
// with those modules refused (helpers/refuseImports.mjs): an import of one fails it.
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BUILT_MAIN, cleanupProcesses, ROOT, startProcess } from '../helpers/process.js';

const REFUSE = ['--import', join(ROOT, 'test', 'helpers', 'refuseImports.mjs')];

afterEach(cleanupProcesses);

describe('start imports', () => {
  it('a single-node gateway (no DATABASE_URL) loads neither pg nor NATS, and serves', async () => {
    const p = startProcess({ TAGW_REFUSE_IMPORTS: 'pg,@nats-io/' }, undefined, [...REFUSE, BUILT_MAIN]);
    const url = await p.listening;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect(p.output()).not.toContain('refused import');
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 30_000);

  it('the refusal works: a process that imports a refused module fails, naming it', async () => {
    const p = startProcess({ TAGW_REFUSE_IMPORTS: 'better-sqlite3' }, undefined, [...REFUSE, BUILT_MAIN]);
    expect(await p.exited).not.toBe(0);
    expect(p.output()).toContain("refused import of 'better-sqlite3'");
  }, 30_000);
});
