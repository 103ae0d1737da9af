// The background WAL checkpointer: a real worker thread on a real SQLite file copies committed
// frames back into the database while the writer only appends (its own automatic checkpoint is a
// far-off backstop), so no trade commit carries a checkpoint.
import { mkdtempSync, rmSync } from 'node:fs';
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
});
