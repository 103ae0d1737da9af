// Backup and restore (src/store/backup.ts): an online copy from another process while a gateway
// takes orders, and a restore that refuses a held DATA_DIR, a damaged file or a newer schema.
import Database from 'better-sqlite3';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { backupDatabase, BackupError, restoreDatabase, secretKeyFingerprint } from '../../src/store/backup.js';
import { DataDirInUseError } from '../../src/store/dataDirLock.js';
import { configureWal, dbPath, openDb } from '../../src/store/db.js';
import { SCHEMA_VERSION, SchemaTooNewError } from '../../src/store/migrations.js';
import { builtCli } from '../helpers/build.js';
import { cleanupProcesses, ROOT, startProcess, tempDir } from '../helpers/process.js';
import { bindAccount, openedTickets, orderSend, type Sent } from '../helpers/trading.js';

afterEach(cleanupProcesses);

const MK = 'backup-test-management-key-0123456789';
const KEY_A = 'a'.repeat(64);

const integrity = (file: string) => {
  const db = new Database(file, { readonly: true });
  try {
    return db.pragma('integrity_check', { simple: true });
  } finally {
    db.close();
  }
};
const errorOf = async (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as Error);

/** A DATA_DIR holding a current tagw database and a secret key file. */
function dataDir(): string {
  const dir = tempDir();
  openDb(dir).close();
  writeFileSync(join(dir, 'secret.key'), KEY_A + '\n', { mode: 0o600 });
  return dir;
}

describe('backup under concurrent writes from another process', () => {
  it('each copy is one commit: every transaction of the writer is in it whole or not at all', async () => {
    const dir = tempDir();
    const file = dbPath(dir);
    const init = new Database(file);
    configureWal(init);
    init.exec('CREATE TABLE a (n INTEGER PRIMARY KEY, pad BLOB); CREATE TABLE b (n INTEGER PRIMARY KEY, pad BLOB); CREATE TABLE total (n INTEGER); INSERT INTO total VALUES (0);');
    init.close();
    // The writer: each transaction adds a row to a and to b and bumps total, as fast as it can.
    const writer = spawn(process.execPath, ['-e', `
      const db = new (require('better-sqlite3'))(${JSON.stringify(file)});
      db.pragma('busy_timeout = 5000');
      const ins = db.transaction((n) => {
        db.prepare('INSERT INTO a VALUES (?, randomblob(2000))').run(n);
        db.prepare('INSERT INTO b VALUES (?, randomblob(2000))').run(n);
        db.prepare('UPDATE total SET n = ?').run(n);
      });
      let n = 0;
      const loop = () => { for (let i = 0; i < 20; i++) ins(++n); if (n === 200) process.stdout.write('ready\\n'); setImmediate(loop); };
      loop();
    `], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await new Promise<void>((r) => writer.stdout.once('data', () => r()));
      const live = new Database(file, { readonly: true });
      const totalNow = () => (live.prepare('SELECT n FROM total').get() as { n: number }).n;
      let copiedDuringWrites = 0;
      for (let i = 0; i < 5; i++) {
        const before = totalNow();
        const out = join(dir, `copy-${i}.sqlite`);
        await backupDatabase({ dataDir: dir }, out);
        if (totalNow() > before) copiedDuringWrites++;
        expect(integrity(out)).toBe('ok');
        const copy = new Database(out, { readonly: true });
        const counts = copy.prepare('SELECT (SELECT count(*) FROM a) AS a, (SELECT count(*) FROM b) AS b, (SELECT n FROM total) AS total').get() as Record<string, number>;
        copy.close();
        expect(counts.a).toBeGreaterThanOrEqual(before);
        expect(counts).toEqual({ a: counts.total, b: counts.total, total: counts.total });
      }
      live.close();
      // The writer really was committing while the copies were taken.
      expect(copiedDuringWrites).toBeGreaterThan(0);
    } finally {
      writer.kill('SIGKILL');
    }
  }, 30_000);
});

describe('backupDatabase / restoreDatabase', () => {
  it('records the schema version, where the secret key lives and its fingerprint, never the key', async () => {
    const dir = dataDir();
    const out = join(tempDir(), 'b.sqlite');
    const report = await backupDatabase({ dataDir: dir }, out, () => Date.UTC(2026, 10, 24));
    expect(report).toMatchObject({ schemaVersion: SCHEMA_VERSION, takenAt: '2026-11-24T00:00:00.000Z', secretKey: { location: join(dir, 'secret.key'), fingerprint: secretKeyFingerprint(Buffer.from(KEY_A, 'hex')) } });
    const bytes = readFileSync(out);
    expect(bytes.includes(Buffer.from(KEY_A))).toBe(false);
    expect(bytes.includes(Buffer.from(KEY_A, 'hex'))).toBe(false);
    // One self-contained file: no WAL beside it.
    expect(existsSync(out + '-wal')).toBe(false);
    // A configured key is named as such.
    const configured = await backupDatabase({ dataDir: dir, secretKey: 'b'.repeat(64) }, join(tempDir(), 'c.sqlite'));
    expect(configured.secretKey).toEqual({ location: expect.stringContaining('TAGW_SECRET_KEY'), fingerprint: secretKeyFingerprint(Buffer.from('b'.repeat(64), 'hex')) });
  });

  it('never overwrites a file, and needs a database to copy', async () => {
    const dir = dataDir();
    const out = join(tempDir(), 'b.sqlite');
    writeFileSync(out, 'precious');
    expect(await errorOf(backupDatabase({ dataDir: dir }, out))).toMatchObject({ code: 'BACKUP_EXISTS' });
    expect(readFileSync(out, 'utf8')).toBe('precious');
    expect(await errorOf(backupDatabase({ dataDir: tempDir() }, join(tempDir(), 'x.sqlite')))).toMatchObject({ code: 'NO_DATABASE' });
  });

  it('restore refuses a damaged file, something else than a tagw database, and a newer schema, leaving DATA_DIR as it was', async () => {
    const dir = dataDir();
    const live = new Database(dbPath(dir));
    live.prepare("INSERT INTO customers VALUES ('keep-me', 'n', 1)").run();
    live.close();
    const good = join(tempDir(), 'good.sqlite');
    await backupDatabase({ dataDir: dir }, good);

    const damaged = join(tempDir(), 'damaged.sqlite');
    const bytes = readFileSync(good);
    // Garbage over the b-tree pages after the schema page.
    bytes.fill(0xa5, 4096 + 100, 4096 * 3);
    writeFileSync(damaged, bytes);
    const newer = join(tempDir(), 'newer.sqlite');
    copyFileSync(good, newer);
    const n = new Database(newer);
    n.pragma('user_version = 99');
    n.close();
    const notTagw = join(tempDir(), 'other.sqlite');
    new Database(notTagw).exec('CREATE TABLE t (x)');
    const text = join(tempDir(), 'notes.txt');
    writeFileSync(text, 'hello '.repeat(1000));

    expect(await errorOf(restoreDatabase({ dataDir: dir }, damaged))).toMatchObject({ code: 'INTEGRITY_FAILED' });
    const tooNew = await errorOf(restoreDatabase({ dataDir: dir }, newer));
    expect(tooNew).toBeInstanceOf(SchemaTooNewError);
    // It names the backup as the newer one, not the DATA_DIR (which it did not touch).
    expect((tooNew as Error).message).toBe(`${newer}: this backup's schema version 99 is newer than this build's ${SCHEMA_VERSION} (taken by a newer tagw): restore it with that build, or choose a backup taken by this one; DATA_DIR is unchanged`);
    expect(await errorOf(restoreDatabase({ dataDir: dir }, notTagw))).toMatchObject({ code: 'NOT_A_BACKUP' });
    expect(await errorOf(restoreDatabase({ dataDir: dir }, text))).toMatchObject({ code: 'NOT_A_BACKUP' });
    expect(await errorOf(restoreDatabase({ dataDir: dir }, join(dir, 'missing.sqlite')))).toBeInstanceOf(BackupError);
    const after = new Database(dbPath(dir), { readonly: true });
    expect(after.prepare("SELECT id FROM customers WHERE id = 'keep-me'").get()).toEqual({ id: 'keep-me' });
    after.close();
    // The data dir lock was released each time: a restore of the good file goes through.
    const report = await restoreDatabase({ dataDir: dir }, good);
    expect(report.previous).toMatch(/tagw\.sqlite\.before-restore-/);
    expect(report.secretKey.matches).toBe(true);
  });

  it('a backup file is readable by its owner only (0600): it holds key hashes, sealed passwords and orders', async () => {
    const out = join(tempDir(), 'b.sqlite');
    const umask = process.umask(0o022); // a root shell's usual umask: files 0644 unless made otherwise
    try {
      await backupDatabase({ dataDir: dataDir() }, out);
    } finally {
      process.umask(umask);
    }
    expect((statSync(out).mode & 0o777).toString(8)).toBe('600');
  });

  it('restore run as root keeps the owner and mode of the database it replaces: the service user can still write it', async () => {
    // docs/operations.md runs `tagw restore` as root on the DATA_DIR of the systemd unit's own user
    // (DynamicUser). A database left owned by root is one that user cannot write: the gateway
    // could not start on it. Changing a file's owner needs root: this test does.
    expect(process.getuid?.(), 'this test changes file owners: run it as root').toBe(0);
    const dir = dataDir();
    const service = 65534; // nobody
    chownSync(dir, service, service);
    chownSync(dbPath(dir), service, service);
    chmodSync(dbPath(dir), 0o640);
    const out = join(tempDir(), 'b.sqlite');
    await backupDatabase({ dataDir: dir }, out);
    await restoreDatabase({ dataDir: dir }, out);
    const st = statSync(dbPath(dir));
    expect({ uid: st.uid, gid: st.gid, mode: (st.mode & 0o777).toString(8) }).toEqual({ uid: service, gid: service, mode: '640' });
    // With no database to replace (a new machine), the restored one belongs to DATA_DIR's owner.
    const fresh = tempDir();
    chownSync(fresh, service, service);
    await restoreDatabase({ dataDir: fresh }, out);
    const st2 = statSync(dbPath(fresh));
    expect({ uid: st2.uid, gid: st2.gid, mode: (st2.mode & 0o777).toString(8) }).toEqual({ uid: service, gid: service, mode: '600' });
    // And the lock file the restore made there (gateway.lock, none before): left root's, the
    // service's start failed on it, `cannot write .../gateway.lock: EACCES (owned by uid 0, this
    // process runs as uid 65534)`, exit 1, restarted by systemd every 2 s (seen by hand).
    const lock = statSync(join(fresh, 'gateway.lock'));
    expect({ uid: lock.uid, gid: lock.gid }).toEqual({ uid: service, gid: service });
  });

  it('restore onto a machine with another key says the key does not match', async () => {
    const dir = dataDir();
    const out = join(tempDir(), 'b.sqlite');
    await backupDatabase({ dataDir: dir }, out);
    const fresh = tempDir();
    mkdirSync(fresh, { recursive: true });
    const other = await restoreDatabase({ dataDir: fresh, secretKey: 'c'.repeat(64) }, out);
    expect(other).toMatchObject({ previous: null, pendingMigrations: [], schemaVersion: SCHEMA_VERSION });
    expect(other.secretKey).toMatchObject({ location: join(dir, 'secret.key'), matches: false });
    // and which key it found instead (the CLI names it first: docs/operations.md#backup-and-restore)
    expect(other.secretKey.found).toEqual({ location: expect.stringContaining('TAGW_SECRET_KEY'), fingerprint: secretKeyFingerprint(Buffer.from('c'.repeat(64), 'hex')) });
    expect(integrity(dbPath(fresh))).toBe('ok');
    // The bookkeeping table of the backup does not end up in the live database.
    const db = new Database(dbPath(fresh), { readonly: true });
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'tagw_backup'").get()).toBeUndefined();
    db.close();
  });
  it('a DATA_DIR or a backup its user may not read is said to be unreadable, not missing', () => {
    // `npx tagw backup` run as a user who cannot enter the gateway's DATA_DIR (0700, the service's
    // own) was told "no database to back up (is DATA_DIR right?)", and a restore of a backup file it
    // could not read "no such file": both send the operator looking for the wrong mistake.
    expect(process.getuid?.(), 'this test runs the CLI as another user: run it as root').toBe(0);
    const nobody = 65534;
    const asNobody = (dataDirPath: string, args: string[]) =>
      spawnSync(process.execPath, [...builtCli(), ...args], { uid: nobody, gid: nobody, env: { PATH: process.env.PATH, DATA_DIR: dataDirPath }, encoding: 'utf8', timeout: 30_000 });
    const theirs = dataDir(); // root's, 0700
    chmodSync(theirs, 0o700);
    const mine = tempDir();
    chownSync(mine, nobody, nobody);
    const b = asNobody(theirs, ['backup', join(mine, 'b.sqlite')]);
    expect(b.status, b.stderr).toBe(1);
    expect(b.stderr).toMatch(/permission denied/i);
    expect(b.stderr).not.toMatch(/no database/);
    // migrate --check likewise: it said "schema version: 0, 15 migration(s) would run" of a
    // database it could not see, exit 0.
    const m = asNobody(theirs, ['migrate', '--check']);
    expect(m.status, m.stdout + m.stderr).toBe(1);
    expect(m.stderr).toMatch(/permission denied/i);
    expect(m.stdout).not.toMatch(/would run/);
    // A backup file only root may read (backups are 0600), restored by another user into its own DATA_DIR.
    const rootsBackup = join(tempDir(), 'r.sqlite');
    copyFileSync(dbPath(theirs), rootsBackup);
    chmodSync(rootsBackup, 0o600);
    chmodSync(join(rootsBackup, '..'), 0o755);
    const r = asNobody(mine, ['restore', rootsBackup]);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/permission denied/i);
    expect(r.stderr).not.toMatch(/no such file/);
  });
});

describe('backup of a gateway taking orders, restore, replay', () => {
  it('orders accepted before the backup replay after the restore (Idempotent-Replay), never a second order', async () => {
    const a = startProcess({ GATEWAY_MANAGEMENT_KEY: MK });
    const url = await a.listening;
    const { key, id } = await bindAccount(url, MK);
    const before = new Map<string, Sent>();
    for (let i = 0; i < 10; i++) before.set(`pre-${i}`, await orderSend(url, key, id, `pre-${i}`));
    for (const [cid, r] of before) expect(r.status, cid).toBe(200);

    // Three bots keep sending orders while the backup is taken from this (another) process.
    let load = true;
    let n = 0;
    const during: Array<[string, number]> = [];
    const bots = [0, 1, 2].map(async (b) => {
      while (load) {
        const cid = `load-${b}-${n++}`;
        const r = await orderSend(url, key, id, cid);
        if (r.status === 200) during.push([cid, r.ticket!]);
      }
    });
    while (during.length < 5) await new Promise((r) => setTimeout(r, 5));
    const file = join(tempDir(), 'tagw-backup.sqlite');
    const acceptedBeforeBackup = during.slice();
    const report = await backupDatabase({ dataDir: a.dir }, file);
    load = false;
    await Promise.all(bots);
    expect(report.schemaVersion).toBe(SCHEMA_VERSION);
    expect(integrity(file)).toBe('ok');

    // Refused while the gateway holds DATA_DIR.
    expect(await errorOf(restoreDatabase({ dataDir: a.dir }, file))).toBeInstanceOf(DataDirInUseError);
    // An order after the backup: gone after the restore.
    expect((await orderSend(url, key, id, 'after-backup')).status).toBe(200);
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);

    const restored = await restoreDatabase({ dataDir: a.dir }, file);
    expect(restored.secretKey.matches).toBe(true);
    expect(integrity(dbPath(a.dir))).toBe('ok');

    const b = startProcess({ GATEWAY_MANAGEMENT_KEY: MK }, a.dir);
    const urlB = await b.listening;
    for (const [cid, r] of before) {
      expect(await orderSend(urlB, key, id, cid), cid).toEqual({ status: 200, ticket: r.ticket, replay: true });
    }
    // The account's positions are those of the backup: each pre-backup order once.
    const tickets = await openedTickets(urlB, key, id);
    for (const r of before.values()) expect(tickets.filter((t) => t === r.ticket)).toHaveLength(1);
    // So are those the bots had been answered for when the backup started.
    for (const [cid, ticket] of acceptedBeforeBackup) {
      expect(await orderSend(urlB, key, id, cid), cid).toEqual({ status: 200, ticket, replay: true });
    }
    // The order accepted after the backup is not in it: its retry is a new order.
    expect(await orderSend(urlB, key, id, 'after-backup')).toMatchObject({ status: 200, replay: false });
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  }, 60_000);
});
