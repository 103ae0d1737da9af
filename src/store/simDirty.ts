// Where an account's journal rows after its checkpoint start (table sim_dirty), so a load replays
// them without an index of the journal by account. That index cost every order one more b-tree
// leaf in its commit (the account's place among all accounts: ~1 of the 3.2 WAL pages an order
// wrote, ~4 µs of the shard's CPU per order, issue 19); a mark is written once per account between
// two of its checkpoints (with the first row after one, in that row's transaction) and deleted by
// the checkpoint that covers it (in its transaction). An account without a mark has no row after
// its checkpoint. The marks of a shard's busy accounts share a leaf or two of this small table.
import type Database from 'better-sqlite3';
import { writeTransaction } from './db.js';

/** A journal row: [time_ms, seq]. */
export type JournalRef = [number, number];

export interface JournalRow {
  time_ms: number;
  seq: number;
  data: string;
}

export class DirtyMarks {
  private readonly st;
  /** Per server: the rows after the marks of accounts not loaded yet, read at the first load that
   *  needs them (one read of the journal after the oldest mark instead of one per account). */
  private readonly unloaded = new Map<string, Map<string, JournalRow[]>>();

  constructor(db: Database.Database) {
    const p = (sql: string) => db.prepare(sql);
    this.st = {
      mark: p('INSERT OR REPLACE INTO sim_dirty (server, login, time_ms, seq) VALUES (?, ?, ?, ?)'),
      clear: p('DELETE FROM sim_dirty WHERE server = ? AND login = ?'),
      get: p('SELECT time_ms, seq FROM sim_dirty WHERE server = ? AND login = ?'),
      // By design every marked account's rows since the oldest mark: the marks are at most a
      // checkpoint interval old while the shard commits, so this is the journal's last moments.
      marked: p(`SELECT login, time_ms, seq, data FROM sim_journal
        WHERE server = ? AND time_ms >= (SELECT min(time_ms) FROM sim_dirty WHERE server = ?) AND login IN (SELECT login FROM sim_dirty WHERE server = ?)`),
    };
  }

  /** The first row after the account's checkpoint is committed with this (same transaction). */
  mark(server: string, login: string, from: JournalRef): void {
    this.st.mark.run(server, login, from[0], from[1]);
  }

  /** A checkpoint covering every row of the account is committed with this (same transaction). */
  clear(server: string, login: string): void {
    this.st.clear.run(server, login);
  }

  /** The account's mark and its rows after it, in order (none: nothing to replay). */
  rowsToReplay(server: string, login: string): { from: JournalRef; rows: JournalRow[] } | null {
    const mark = this.st.get.get(server, login) as { time_ms: number; seq: number } | undefined;
    if (!mark) return null;
    let byLogin = this.unloaded.get(server);
    if (!byLogin) {
      byLogin = new Map();
      for (const r of this.st.marked.all(server, server, server) as (JournalRow & { login: string })[]) {
        const rows = byLogin.get(r.login) ?? [];
        rows.push({ time_ms: r.time_ms, seq: r.seq, data: r.data });
        byLogin.set(r.login, rows);
      }
      this.unloaded.set(server, byLogin);
    }
    // Rows written since the read are this store's own, of accounts it had loaded: never this one's.
    const rows = byLogin.get(login) ?? [];
    byLogin.delete(login);
    return { from: [mark.time_ms, mark.seq], rows: rows.sort((a, b) => a.seq - b.seq) };
  }
}

/**
 * DDL of sim_dirty, and the move from the journal's account index: a database written with the
 * index gets a mark for every account with rows after its checkpoint (read through the index,
 * the checkpoint's seq from its row), then loses the index. Once, under the write lock (shards
 * open the file at the same time).
 */
export function migrateDirtyMarks(db: Database.Database): void {
  db.exec(`CREATE TABLE IF NOT EXISTS sim_dirty (
    server TEXT NOT NULL, login TEXT NOT NULL, time_ms INTEGER NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (server, login)) WITHOUT ROWID;`);
  const hasIndex = () => (db.pragma('index_list(sim_journal)') as { name: string }[]).some((i) => i.name === 'sim_journal_account');
  if (!hasIndex()) return;
  writeTransaction(db, () => {
    if (!hasIndex()) return;
    db.exec(`INSERT OR REPLACE INTO sim_dirty (server, login, time_ms, seq)
      SELECT j.server, j.login, min(j.time_ms), min(j.seq) FROM sim_state s
      JOIN sim_journal j INDEXED BY sim_journal_account ON j.server = s.server AND j.login = s.login AND j.seq > json_extract(s.data, '$.seq')
      WHERE s.kind = 'A' AND s.key = '' GROUP BY j.server, j.login;
      DROP INDEX sim_journal_account;`);
  });
}
