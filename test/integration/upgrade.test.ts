// Upgrades: a database newer than the build is refused (exit 5, one line, untouched); a rolling
// restart (SIGTERM with orders in flight, then a new process on the same DATA_DIR) loses no
// accepted order and places none twice.
import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS, SCHEMA_VERSION } from '../../src/store/migrations.js';
import { builtCli } from '../helpers/build.js';
import { cleanupProcesses, startProcess, tempDir } from '../helpers/process.js';
import { bindAccount, openedTickets, orderSend, type Sent } from '../helpers/trading.js';

afterEach(cleanupProcesses);

const MK = 'upgrade-test-management-key-0123456789';

describe('schema version', () => {
  it('a database newer than the build refuses to start: one line, exit 5, the file untouched', async () => {
    const dir = tempDir();
    const file = join(dir, 'tagw.sqlite');
    const db = new Database(file);
    db.pragma('user_version = 99');
    db.close();
    const p = startProcess({ GATEWAY_MANAGEMENT_KEY: MK }, dir);
    expect(await p.exited).toBe(5);
    // The start logs its engine, then the refusal: one error line, no stack trace.
    const errors = p.output().trim().split('\n').filter((l) => !l.includes('"level":"info"'));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`schema version 99 is newer than this build's ${SCHEMA_VERSION}`);
    const after = new Database(file, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(99);
    expect(after.prepare("SELECT count(*) AS n FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").get()).toEqual({ n: 0 });
    after.close();
  }, 30_000);

  it('an older database is migrated at start, and the log says from which version to which, naming each migration', async () => {
    const dir = tempDir();
    const file = join(dir, 'tagw.sqlite');
    const from = SCHEMA_VERSION - 2;
    const db = new Database(file);
    for (let v = 0; v < from; v++) db.exec(MIGRATIONS[v]!.sql);
    db.pragma(`user_version = ${from}`);
    db.close();
    const p = startProcess({ GATEWAY_MANAGEMENT_KEY: MK }, dir);
    await p.listening;
    const lines = p.output().trim().split('\n').filter((l) => l.includes('database schema migrated'));
    expect(lines).toHaveLength(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 'info', file, from, to: SCHEMA_VERSION });
    expect(line.migrations).toEqual([from + 1, from + 2].map((v) => `${v} ${MIGRATIONS[v - 1]!.name}`));
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    const after = new Database(file, { readonly: true });
    expect(after.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    after.close();
    // Started again (nothing to migrate), and on a new DATA_DIR: no such line.
    const again = startProcess({ GATEWAY_MANAGEMENT_KEY: MK }, dir);
    await again.listening;
    const fresh = startProcess({ GATEWAY_MANAGEMENT_KEY: MK });
    await fresh.listening;
    expect(again.output()).not.toContain('database schema migrated');
    expect(fresh.output()).not.toContain('database schema migrated');
  }, 60_000);
});

describe('tagw migrate --check', () => {
  it('on a DATA_DIR with no database (a mistyped path) says there is none, not "schema version 0, N migrations would run"', () => {
    const dir = join(tempDir(), 'not-there');
    const run = (args: string[]) => spawnSync(process.execPath, [...builtCli(), ...args], { env: { PATH: process.env.PATH, DATA_DIR: dir }, encoding: 'utf8', timeout: 30_000 });
    const human = run(['migrate', '--check']);
    expect(human.status, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^state: +no database in DATA_DIR: a start creates a new one/m);
    expect(human.stdout).not.toMatch(/schema version: +0\b/);
    const asJson = JSON.parse(run(['--json', 'migrate', '--check']).stdout) as Record<string, unknown>;
    expect(asJson).toMatchObject({ exists: false, current: 0, target: SCHEMA_VERSION });
    expect(existsSync(dir)).toBe(false);
  }, 30_000);
});

describe('rolling restart', () => {
  it('SIGTERM with orders in flight, then a new process on the same DATA_DIR: every accepted order is there once, retries replay', async () => {
    const a = startProcess({ GATEWAY_MANAGEMENT_KEY: MK, DRAIN_TIMEOUT_MS: '5000' });
    const urlA = await a.listening;
    // No certificate configured: plain HTTP, and the start says so.
    expect(a.output()).toContain('plain HTTP and WS: no TLS_CERT_FILE / TLS_KEY_FILE configured');
    const { key, id } = await bindAccount(urlA, MK);

    // Four bots sending orders back to back, each with a fresh clientOrderId, until the old
    // process stops answering. SIGTERM arrives while they are at it.
    const results = new Map<string, Sent>();
    let n = 0;
    const bot = async (b: number) => {
      for (;;) {
        const cid = `roll-${b}-${n++}`;
        const r = await orderSend(urlA, key, id, cid);
        results.set(cid, r);
        if (r.status !== 200) return;
      }
    };
    const bots = [0, 1, 2, 3].map(bot);
    while ([...results.values()].filter((r) => r.status === 200).length < 20) await new Promise((r) => setTimeout(r, 10));
    a.child.kill('SIGTERM');
    await Promise.all(bots);
    expect(await a.exited).toBe(0);

    const accepted = [...results].filter(([, r]) => r.status === 200);
    const notAccepted = [...results].filter(([, r]) => r.status !== 200);
    expect(accepted.length).toBeGreaterThanOrEqual(20);
    // Each bot's last request met the shutdown: refused, or 503 while draining; never a 500.
    for (const [cid, r] of notAccepted) expect([503, 'refused'], cid).toContain(r.status);

    const b = startProcess({ GATEWAY_MANAGEMENT_KEY: MK }, a.dir);
    const urlB = await b.listening;
    // Every accepted order is replayed with its ticket, not placed again.
    for (const [cid, r] of accepted) {
      const again = await orderSend(urlB, key, id, cid);
      expect(again, cid).toEqual({ status: 200, ticket: r.ticket, replay: true });
    }
    // An order that met the shutdown is placed at most once: its retry is either the replay of
    // an order the old process completed, or the first placement.
    const retried = new Map<string, number>();
    for (const [cid] of notAccepted) {
      const again = await orderSend(urlB, key, id, cid);
      expect(again.status, cid).toBe(200);
      retried.set(cid, again.ticket!);
    }
    const expected = [...accepted.map(([, r]) => r.ticket!), ...retried.values()].sort((x, y) => x - y);
    expect(await openedTickets(urlB, key, id)).toEqual(expected);
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  }, 60_000);
});
