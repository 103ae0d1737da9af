// The background WAL checkpointer: a real worker thread on a real SQLite file copies committed
// frames back into the database while the writer only appends (its own automatic checkpoint is a
// far-off backstop), so no trade commit carries a checkpoint.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCheckpointer, type Checkpointer } from '../../src/store/checkpointer.js';
import { dbPath, openDb, WAL_BACKSTOP_PAGES, type Db } from '../../src/store/db.js';

let dir: string;
let db: Db | undefined;
let cp: Checkpointer | undefined;
afterEach(async () => {
  await cp?.stop();
  db?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The WAL header's salts: a writer that restarts the WAL writes a new header (and fsyncs it). */
const walSalt = () => readFileSync(`${dbPath(dir)}-wal`).subarray(16, 24).toString('hex');
const statsUntil = async (c: Checkpointer, ok: (s: Awaited<ReturnType<Checkpointer['stats']>>) => boolean) => {
  const deadline = Date.now() + 15_000;
  let s = await c.stats();
  while (!ok(s) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 10));
    s = await c.stats();
  }
  expect(ok(s), JSON.stringify(s)).toBe(true);
  return s;
};

const walInfo = (d: Db) => (d.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>)[0]!;

describe('background WAL checkpointer', () => {
  it('copies committed WAL frames back into the database without the writer checkpointing', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tagw-ckpt-'));
    db = openDb(dir);
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(WAL_BACKSTOP_PAGES);
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const ins = db.prepare('INSERT INTO t (v) VALUES (?)');
    for (let i = 0; i < 300; i++) ins.run('x'.repeat(500)); // one commit each, far below the backstop
    cp = startCheckpointer(dbPath(dir), { intervalMs: 10 });
    const deadline = Date.now() + 15_000;
    let s = await cp.stats();
    while (!(s.runs > 0 && s.walFrames > 0 && s.checkpointedFrames === s.walFrames) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      s = await cp.stats();
    }
    expect(s.failures).toBe(0);
    expect(s.walFrames).toBeGreaterThan(0);
    expect(s.checkpointedFrames).toBe(s.walFrames);
    // Nothing is left for the writer to copy: its own checkpoint finds every frame backfilled.
    const mine = walInfo(db);
    expect(mine.checkpointed).toBe(mine.log);
    // Writes go on while it runs, and a stop runs a last checkpoint and ends the thread.
    for (let i = 0; i < 50; i++) ins.run('y');
    const last = await cp.stop();
    cp = undefined;
    expect(last).toBeDefined();
    expect(last!.checkpointedFrames).toBe(last!.walFrames);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 350 });
  });

  it('restarts the WAL itself once every frame is copied back, so a writer after a pause only appends (no WAL header and fsync in its commit)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tagw-ckpt-'));
    db = openDb(dir);
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const ins = db.prepare('INSERT INTO t (v) VALUES (?)');
    for (let i = 0; i < 20; i++) ins.run('x');
    // A long interval: the writer's commit and the salt reads around it fall between two runs.
    cp = startCheckpointer(dbPath(dir), { intervalMs: 150 });
    const c = cp;
    let s = await statsUntil(c, (x) => x.restarts >= 1);
    for (let i = 0; i < 3; i++) {
      // The checkpointer restarted the WAL and idles (nobody committed since): its frame stays in the
      // WAL, not copied, so the WAL is not fully copied back when the writer commits.
      const before = walSalt();
      ins.run(`after pause ${i}`);
      expect(walSalt(), 'the writer restarted the WAL').toBe(before);
      const restarts = s.restarts;
      s = await statsUntil(c, (x) => x.restarts > restarts);
    }
    expect(s.failures).toBe(0);
    // Idle, it writes nothing more: no restart without someone else's commit first.
    const idle = s.restarts;
    await new Promise((r) => setTimeout(r, 500));
    expect((await c.stats()).restarts).toBe(idle);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 23 });
  });

  it('runs less often while writes go on without a pause (busyIntervalMs), and at intervalMs again once they pause', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tagw-ckpt-'));
    db = openDb(dir);
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const ins = db.prepare('INSERT INTO t (v) VALUES (?)');
    // Decided by the wait each run gave the timer (stats.nextWaitMs), not by counting runs in a
    // window of wall time (which a loaded machine, starving the writer or the thread, moved).
    cp = startCheckpointer(dbPath(dir), { intervalMs: 10, busyIntervalMs: 1500, busyFrames: 8 });
    const c = cp;
    let s = await statsUntil(c, (x) => x.runs >= 1 && x.nextWaitMs === 10);
    // Sustained writes (page-sized rows, well over 8 frames between two runs, a 1 ms pause between
    // bursts) until a run finds them going on: it then gives the timer busyIntervalMs. (A run in a
    // pause restarts the WAL, so it is not busy: how often runs fall in a pause is up to the machine.)
    const deadline = Date.now() + 15_000;
    while ((await c.stats()).nextWaitMs !== 1500) {
      if (Date.now() > deadline) throw new Error(`no run found the sustained writes: ${JSON.stringify(await c.stats())}`);
      for (let i = 0; i < 50; i++) ins.run('x'.repeat(3000));
      await new Promise((r) => setTimeout(r, 1));
    }
    // Quiet again: a run that finds the pause (fewer than busyFrames new frames) waits intervalMs, so
    // the WAL is restarted soon after a lone commit (not 1,500 ms later).
    s = await statsUntil(c, (x) => x.nextWaitMs === 10); // that run found the pause and restarted the WAL
    for (let i = 0; i < 3; i++) {
      s = await c.stats();
      ins.run('one more');
      s = await statsUntil(c, (x) => x.restarts > s.restarts);
      expect(s.nextWaitMs, 'a lone commit is no sustained write').toBe(10);
    }
    expect(s.failures).toBe(0);
  });

  it('runs rarely once nothing was committed for idleAfterMs, and soon again after a commit (issue 19: an idle node is not woken every 20 ms)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tagw-ckpt-'));
    db = openDb(dir);
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const ins = db.prepare('INSERT INTO t (v) VALUES (?)');
    ins.run('x');
    cp = startCheckpointer(dbPath(dir), { intervalMs: 10, idleIntervalMs: 300, idleAfterMs: 100 });
    const c = cp;
    // Decided by the wait each run gave its timer (stats.nextWaitMs), not by counting runs in wall time.
    let s = await statsUntil(c, (x) => x.restarts >= 1 && x.nextWaitMs === 300);
    for (let i = 0; i < 2; i++) {
      const before = walSalt();
      ins.run(`after idle ${i}`);
      expect(walSalt(), 'the writer restarted the WAL').toBe(before); // still only appends
      const restarts = s.restarts;
      s = await statsUntil(c, (x) => x.restarts > restarts);
      expect(s.walFrames, 'the commit was copied back').toBeGreaterThan(0);
      s = await statsUntil(c, (x) => x.nextWaitMs === 300); // idle again
    }
    expect(s.failures).toBe(0);
  });

  it('runs at SCHED_IDLE with priority idle (CHECKPOINTER_PRIORITY, the gateway\'s default), so a woken order thread preempts it; as any thread with normal', async () => {
    dir = mkdtempSync(join(tmpdir(), 'tagw-ckpt-'));
    db = openDb(dir);
    /** The thread's scheduling policy, /proc's field 41 (0 SCHED_OTHER, 5 SCHED_IDLE). */
    const policyOf = (tid: number) => {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[38]);
    };
    cp = startCheckpointer(dbPath(dir), { priority: 'idle' });
    const idle = await cp.stats();
    expect(idle.policy, 'SCHED_IDLE is set with chrt: install util-linux').toBe('idle');
    expect(policyOf(idle.tid!)).toBe(5);
    await cp.stop();
    cp = startCheckpointer(dbPath(dir), { priority: 'normal' });
    expect((await cp.stats()).policy).toBe('normal');
    // Unchanged: the process's own threads stay as they were.
    expect(policyOf(process.pid)).toBe(0);
  });
});
