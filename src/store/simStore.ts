// Persistence of simulator state (implements the simulator's port, src/sim/persistence.ts): accounts, orders, open positions, deals, request ids,
// equity points, id counters. One transaction per trade (`apply`), prepared statements.
// Records are stored as JSON next to the few columns queries filter on.
import type Database from 'better-sqlite3';
import type { EquityPoint } from '../market/account.js';
import type { Deal, Order, RequestLookup } from '../market/orders.js';
import type { LoadedAccount, SimChange, SimPersistence, StoredAccount } from '../sim/persistence.js';
import { batchKey, decodeChange, JOURNAL_SLACK_MS } from './simCodec.js';
import { CHECKPOINT } from './simCheckpoint.js';
import { configureWal } from './db.js';
import { RequestRefs } from './requestRefs.js';
import { newMirror } from './simMirror.js';
import { REQUEST_TTL_MS, SimJournal } from './simJournal.js';

export { migrateSimStore } from './simSchema.js';

/** Loading accounts (checkpoint, request ids, the journal replayed after it) and reading their history. */
export class SqliteSimStore extends SimJournal implements SimPersistence {
  /** Pragmas for a file database: WAL, synchronous=NORMAL (durable across process crashes). */
  static configure(db: Database.Database): void {
    configureWal(db);
  }

  loadAccount(server: string, login: string): LoadedAccount | null {
    this.commitQueued();
    const row = this.st.stateGet.get(server, login, CHECKPOINT, '') as { data: string } | undefined;
    if (!row) return null;
    const read = this.checkpoints.read(server, login, row.data);
    const cp = read.state;
    // The server and login as the caller holds them (the row was found by them): the checkpoint's
    // parsed copies would be two more strings per account (issue 19, memory per idle account).
    // A checkpoint written before the login's highest ticket was kept: every id handed out on the
    // server so far is below the counter's next (a bound, kept by the next checkpoint as its own).
    const counter = read.lastTicket === undefined ? this.st.counterGet.get(server) as { next: number } | undefined : undefined;
    const lastTicket = read.lastTicket ?? (counter ? counter.next - 1 : 0);
    const m = newMirror({ ...cp.account, server, login }, cp.seq, cp.lastTimeMs, this.clock.now(), lastTicket);
    m.positions = cp.positions;
    m.activeOrders = cp.activeOrders;
    m.rows = cp.rows;
    for (const row of this.st.requestBatches.all(server, login, batchKey(cp.lastTimeMs - REQUEST_TTL_MS, 0)) as { data: string }[]) {
      for (const [id, t, q] of JSON.parse(row.data) as [string, number, number][]) (m.refs ??= new RequestRefs()).set(id, t, q);
    }
    // Replay what was journaled after the checkpoint; the mark stays until a checkpoint covers it.
    const replay = this.marks.rowsToReplay(server, login);
    if (replay) {
      for (const r of replay.rows) {
        if (r.seq <= cp.seq) continue;
        this.applyToMirror(m, decodeChange(r.data), r.time_ms, r.seq, read);
        m.seq = r.seq;
        // A timeless change must not be journaled before the rows replayed (restarts read from a mark's time on).
        m.lastTimeMs = Math.max(m.lastTimeMs, r.time_ms);
      }
      m.dirtyFrom = replay.from;
      m.marked = true;
      this.markDirty(m);
    }
    this.mirrors.set(this.key(server, login), m);
    return {
      // Its own object (the account changes it), sharing the strings: a structured clone copied
      // each of them (its name, password hash and salt, ~200 B per account).
      account: { ...m.account },
      positions: [...read.positions.values()].map((p) => ({ ...p })),
      activeOrders: [...read.activeOrders.values()],
      lastTicket: m.lastTicket,
    };
  }

  /** Accounts held in memory (their mirrors): loaded or created, and not released since. */
  get loadedAccounts(): number {
    return this.mirrors.size;
  }

  /** Lets go of an account's mirror if the disk holds all of it (checkpointed, no journal row after
   *  its checkpoint, nothing queued): the next loadAccount reads it again, the same. False: it has
   *  changes not checkpointed yet (a checkpoint pass comes within checkpointMs), or the store is
   *  poisoned; it stays. Its caller holds nothing of the account any more (SimServer.releaseIdle).
   *  `open`: forgotten, positions and orders open too; let go once its rows are committed. */
  release(server: string, login: string, open = false): boolean {
    const k = this.key(server, login);
    const m = this.mirrors.get(k);
    if (!m) return true;
    if (open && !this.clean(m)) {
      // Forgotten (SimServer.forget): another thread may load it next, so its checkpoint is written
      // now rather than by a later pass of this copy (which would clear the marks of the other's
      // rows). A full disk or a poisoned store keeps it here, asked again later.
      try {
        this.checkpoint();
      } catch {
        return false;
      }
    }
    if (!this.clean(m)) return false;
    this.mirrors.delete(k);
    return true;
  }

  createAccount(a: StoredAccount): void {
    const m = newMirror({ ...a }, 0, a.createdMs, 0, 0);
    this.mirrors.set(this.key(a.server, a.login), m);
    this.markDirty(m);
    // The checkpoint row is what makes the account exist: write it at once. Failed (a full disk),
    // the account does not exist, here either.
    try {
      this.checkpoint();
    } catch (err) {
      this.mirrors.delete(this.key(a.server, a.login));
      this.dirtyMirrors.delete(m);
      throw err;
    }
  }

  /** Changes journaled in [fromMs, toMs + slack): a row's time is the latest time it
   *  carries (journal times never go back), so a deal at t can sit in a row a little after t
   *  when fills of several symbols interleave; callers filter by the record's own time. */
  private changes(server: string, login: string, fromMs: number, toMs: number): SimChange[] {
    this.commitQueued();
    toMs = Math.min(Number.MAX_SAFE_INTEGER, toMs + JOURNAL_SLACK_MS);
    const rows = this.st.journalRange.all(server, fromMs, toMs, login) as { data: string }[];
    // Rows a full disk keeps waiting (commitQueued) come after those on disk: an account's times never go back.
    return [...rows, ...this.queuedRows(server, login, fromMs, toMs)].map((r) => decodeChange(r.data));
  }

  deals(server: string, login: string, fromMs: number, toMs: number): Deal[] {
    // A journal row's time is the time of its change; a deal carries its own time.
    const out: Deal[] = [];
    for (const c of this.changes(server, login, fromMs, toMs)) for (const d of c.deals ?? []) if (d.timeMsc >= fromMs && d.timeMsc < toMs) out.push(d);
    return out.sort((x, y) => x.timeMsc - y.timeMsc || x.ticket - y.ticket);
  }
  historyOrders(server: string, login: string, fromMs: number, toMs: number): Order[] {
    const out: { o: Order; t: number }[] = [];
    for (const c of this.changes(server, login, fromMs, toMs)) for (const o of c.orders ?? []) if (o.doneMs !== null && o.doneMs >= fromMs && o.doneMs < toMs) out.push({ o: o.order, t: o.doneMs });
    return out.sort((x, y) => x.t - y.t || x.o.ticket - y.o.ticket).map((x) => x.o);
  }
  equity(server: string, login: string, fromMs: number): EquityPoint[] {
    const out: EquityPoint[] = [];
    for (const c of this.changes(server, login, fromMs, Number.MAX_SAFE_INTEGER)) if (c.equity && c.equity.timeMsc >= fromMs) out.push(c.equity);
    return out;
  }
  request(server: string, login: string, requestId: string): RequestLookup | null {
    // Checked on every trade with an id: an unknown id (the usual case) must not force the group commit.
    const m = this.mirrors.get(this.key(server, login));
    if (!m) return null;
    const ref = m.refs?.get(requestId);
    if (!ref) return null;
    // A known id: its row may still be queued (applied this turn).
    this.commitQueued();
    const row = (this.st.journalRow.get(server, ref[0], login, ref[1]) as { data: string } | undefined)
      ?? this.queuedRows(server, login, ref[0], ref[0] + 1).find((r) => r.seq === ref[1]);
    return row ? (decodeChange(row.data).request ?? null) : null;
  }
}
