// Persistence of the /v1/stream account history (docs/stream.md "History"). The main thread writes
// each batch of account events in one transaction before their frames are sent, so after a crash a
// client is never ahead of what the gateway finds here. Prepared statements, primary-key access only.
import type { Db } from './db.js';

export interface StoredEntry { seq: number; at: number; frame: string }
/** The last deal an account stream carried: its ticket and broker time (UTC ms); ticket 0 before the
 *  first, with the epoch's start on the shards' clock. */
export interface DealMark { ticket: number; timeMsc: number }
export interface StoredStream { epoch: string; seq: number; aliveAt: number; deal: DealMark; entries: StoredEntry[] }
export interface StreamWrite {
  accountId: string; epoch: string; seq: number; deal: DealMark; entries: StoredEntry[]; keepFrom: number;
  /** A new epoch: the account's rows of the one before go first. */
  fresh?: boolean;
}

export class StreamHistoryStore {
  private readonly st;

  constructor(private readonly db: Db) {
    const p = (sql: string) => db.prepare(sql);
    this.st = {
      epoch: p('SELECT epoch, seq, alive_at AS aliveAt, deal_ticket AS ticket, deal_at AS timeMsc FROM stream_epochs WHERE account_id = ?'),
      entries: p('SELECT seq, at, frame FROM stream_history WHERE account_id = ? ORDER BY seq'),
      alive: p('SELECT account_id AS accountId FROM stream_epochs WHERE alive_at >= ?'),
      upsert: p(`INSERT INTO stream_epochs (account_id, epoch, seq, alive_at, deal_ticket, deal_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT(account_id) DO UPDATE SET epoch = excluded.epoch, seq = excluded.seq, alive_at = excluded.alive_at,
          deal_ticket = excluded.deal_ticket, deal_at = excluded.deal_at`),
      touch: p('UPDATE stream_epochs SET alive_at = ? WHERE account_id = ?'),
      insert: p('INSERT OR REPLACE INTO stream_history (account_id, seq, at, frame) VALUES (?, ?, ?, ?)'),
      trim: p('DELETE FROM stream_history WHERE account_id = ? AND seq < ?'),
      dropEpoch: p('DELETE FROM stream_epochs WHERE account_id = ?'),
      dropEntries: p('DELETE FROM stream_history WHERE account_id = ?'),
    };
  }

  load(accountId: string): StoredStream | undefined {
    const row = this.st.epoch.get(accountId) as { epoch: string; seq: number; aliveAt: number; ticket: number; timeMsc: number } | undefined;
    if (!row) return undefined;
    const { ticket, timeMsc, ...rest } = row;
    return { ...rest, deal: { ticket, timeMsc }, entries: this.st.entries.all(accountId) as StoredEntry[] };
  }

  /** Accounts whose stream was still kept at `since` (ms): candidates to pick up again at start. */
  aliveSince(since: number): string[] {
    return (this.st.alive.all(since) as { accountId: string }[]).map((r) => r.accountId);
  }

  /** One transaction: new entries, each account's epoch and seq, and what fell out of the history. */
  write(batch: readonly StreamWrite[], now: number): void {
    this.db.transaction(() => {
      for (const w of batch) {
        if (w.fresh) this.st.dropEntries.run(w.accountId);
        this.st.upsert.run(w.accountId, w.epoch, w.seq, now, w.deal.ticket, w.deal.timeMsc);
        for (const e of w.entries) this.st.insert.run(w.accountId, e.seq, e.at, e.frame);
        this.st.trim.run(w.accountId, w.keepFrom);
      }
    })();
  }

  /** The streams still kept (sockets open or within the retention time) are alive now; trims age. */
  touch(accounts: ReadonlyArray<{ accountId: string; keepFrom: number }>, now: number): void {
    this.db.transaction(() => {
      for (const a of accounts) {
        this.st.touch.run(now, a.accountId);
        this.st.trim.run(a.accountId, a.keepFrom);
      }
    })();
  }

  /** The account's stream ended (released, rebound, its shard restarted): its next epoch starts afresh. */
  drop(accountId: string): void {
    this.db.transaction(() => {
      this.st.dropEpoch.run(accountId);
      this.st.dropEntries.run(accountId);
    })();
  }
}
