// writeTransaction (src/store/db.ts): a transaction that reads before it writes takes the write
// lock at BEGIN. Deferred, its read's snapshot goes stale when another connection commits while
// it waits for the lock, and SQLite answers its write SQLITE_BUSY at once (seen as a 500 on
// /ConnectEx in cluster mode, cluster-create-commit.test.ts, when a shard committed meanwhile).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openSqliteFile, configureWal, writeTransaction, type Db } from '../../src/store/db.js';
import { otherWriter } from '../helpers/otherWriter.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(): { db: Db; file: string } {
  const d = mkdtempSync(join(tmpdir(), 'tagw-write-tx-'));
  dirs.push(d);
  const file = join(d, 'x.sqlite');
  const db = openSqliteFile(file, undefined, configureWal);
  db.pragma('busy_timeout = 5000');
  db.exec('CREATE TABLE t (v TEXT)');
  return { db, file };
}
/** Reads, then writes: as the cluster's local copy of a created seat does (seatById, then insertSeat). */
const readThenWrite = (db: Db) => () => {
  db.prepare('SELECT count(*) FROM t').pluck().get();
  db.prepare('INSERT INTO t (v) VALUES (?)').run('mine');
};

describe('writeTransaction', () => {
  it('a read-then-write transaction waits for another connection\'s write and commits after it', async () => {
    const { db, file } = setup();
    const other = otherWriter(file, 150);
    await other.locked;
    writeTransaction(db, readThenWrite(db));
    await other.done;
    expect(db.prepare('SELECT v FROM t ORDER BY rowid').pluck().all()).toEqual(['other', 'mine']);
    db.close();
  });

  it('(why) the same transaction DEFERRED fails at once with SQLITE_BUSY when the other connection commits while it waits', async () => {
    const { db, file } = setup();
    const other = otherWriter(file, 150);
    await other.locked;
    // The read runs from the snapshot before the other commit; the write waits, then finds it stale.
    expect(() => db.transaction(readThenWrite(db))()).toThrow(expect.objectContaining({ code: expect.stringMatching(/^SQLITE_BUSY/) }));
    await other.done;
    db.close();
  });
});
