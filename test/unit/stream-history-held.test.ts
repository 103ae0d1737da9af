// The /v1/stream history's batches on a full DATA_DIR (src/stream/historyWrites.ts, docs/storage.md):
// held in memory, frames unsent, and written then sent once there is room; at most
// STREAM_HISTORY_HELD_MAX_BYTES of them. Before, an episode held every batch, however long it lasted
// and however many accounts traded meanwhile. Past the bound, an account whose frame does not fit
// has its waiting frames dropped (none was sent), its stream begins a new epoch (its sockets are
// told: 4014) whose frames go out unstored until its position is written, fresh, once there is
// room; a resume across the gap then answers recovered:false, never frames a restart would
// contradict. A real SQLite gateway database whose history writes fail as a full disk makes them
// fail (SQLITE_FULL) while `disk.full` holds, the retry timer in the test's hands.
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { openDb } from '../../src/store/db.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { StreamHistoryStore } from '../../src/store/streamHistory.js';
import { DealLedger } from '../../src/stream/deals.js';
import { AccountHistory, newEpoch } from '../../src/stream/history.js';
import { HistoryWrites, type Pending } from '../../src/stream/historyWrites.js';
import type { AccountState } from '../../src/stream/state.js';
import { failWhenFull, ManualScheduler } from '../helpers/fullDisk.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();
const limits = { maxEvents: 10_000, maxAgeMs: 3_600_000 };
const NOW = 1_700_000_000_000;

function setup(heldMaxBytes: number) {
  const db = openDb(tempDir(cleanup, 'tagw-history-held-'));
  cleanup.dbs.push(db);
  const disk = failWhenFull(db, [['stream_history', 'INSERT'], ['stream_epochs', 'INSERT'], ['stream_epochs', 'UPDATE'], ['stream_history', 'DELETE']]);
  const lines: Array<{ level: string; msg: string; [k: string]: unknown }> = [];
  const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l) as (typeof lines)[number]));
  const store = new StreamHistoryStore(db);
  const timers = new ManualScheduler();
  const delivered = new Map<string, Array<{ epoch: string; seq: number }>>();
  const overflowed: string[] = [];
  const accounts = new Map<string, AccountState>();
  const account = (id: string): AccountState => {
    const acc = { id, sockets: new Set(), history: new AccountHistory(newEpoch(NOW), 0, limits), deals: new DealLedger({ ticket: 0, timeMsc: NOW }) } as unknown as AccountState;
    accounts.set(id, acc);
    return acc;
  };
  const w = new HistoryWrites({ log, clock: { now: () => NOW }, history: store, fullDisk: new FullDisk({ log, retryMs: 1_000 }), scheduler: timers }, {
    deliver: (acc, entries) => {
      if (entries.length > 0) acc.history.markSent(entries.at(-1)!.seq);
      const list = delivered.get(acc.id) ?? [];
      for (const e of entries) list.push({ epoch: acc.history.epoch, seq: e.seq });
      delivered.set(acc.id, list);
    },
    // As AccountEvents does: a new epoch, not written now (its sockets would be ended with 4014).
    overflow: (acc) => {
      overflowed.push(acc.id);
      acc.history = new AccountHistory(newEpoch(NOW), 0, limits);
      acc.deals = new DealLedger({ ticket: 0, timeMsc: NOW });
    },
    kept: (acc) => accounts.get(acc.id) === acc,
  }, heldMaxBytes);
  const frame = 'x'.repeat(1_000);
  const record = (acc: AccountState): Pending => ({ acc, epoch: acc.history.epoch, entry: acc.history.append('POSITIONS', JSON.stringify(frame), NOW) });
  return { db, disk, store, timers, delivered, overflowed, account, w, record, lines };
}

describe('the stream history on a full disk, bounded', () => {
  it('holds at most STREAM_HISTORY_HELD_MAX_BYTES: an account past it begins a new epoch (its held frames, never sent, dropped), and a resume across the gap is recovered:false after a restart', () => {
    const cap = 64 * 1024;
    const s = setup(cap);
    const accs = Array.from({ length: 8 }, (_, i) => s.account(`acc-${i}`));
    // Before the disk fills: one stored and sent frame each.
    s.w.write(accs.map((a) => s.record(a)));
    const before = new Map(accs.map((a) => [a.id, { epoch: a.history.epoch, seq: a.history.sent }]));
    expect([...before.values()].map((p) => p.seq)).toEqual(accs.map(() => 1));
    s.disk.full = true;
    let maxHeld = 0;
    for (let i = 0; i < 400; i++) {
      s.w.write([s.record(accs[i % accs.length]!)]);
      maxHeld = Math.max(maxHeld, s.w.heldBytes);
      if (i % 50 === 49) s.timers.fire(); // retries meanwhile, the disk still full
    }
    // ~1.2 KB a frame, 400 frames: without the bound ~470 KB waited.
    expect(maxHeld).toBeLessThanOrEqual(cap);
    expect(maxHeld).toBeGreaterThan(cap / 2);
    expect(s.overflowed.length).toBeGreaterThan(0);
    expect(s.w.overflows).toBe(s.overflowed.length);
    expect(s.w.waiting).toBe(true);
    const overflowLines = s.lines.filter((l) => /reached STREAM_HISTORY_HELD_MAX_BYTES/.test(l.msg));
    expect(overflowLines).toHaveLength(1); // one an episode, however many accounts
    expect(s.lines.filter((l) => /DATA_DIR is full: background writes wait/.test(l.msg))).toHaveLength(1);
    // Nothing of the old epochs was sent while the disk was full: a client's position there is what a restart finds.
    for (const a of accs) {
      const old = before.get(a.id)!;
      expect((s.delivered.get(a.id) ?? []).filter((d) => d.epoch === old.epoch).map((d) => d.seq)).toEqual([1]);
    }
    // An account past the bound streams its new epoch, unstored (it is written fresh once there is room).
    const broken = accs.find((a) => s.overflowed.includes(a.id))!;
    const sentNew = (s.delivered.get(broken.id) ?? []).filter((d) => d.epoch === broken.history.epoch);
    expect(sentNew.length).toBeGreaterThan(0);
    expect(sentNew.map((d) => d.seq)).toEqual(sentNew.map((_, i) => i + 1));

    // Room again: the held frames are written, then sent; the new epochs are written at what they sent.
    s.disk.full = false;
    s.timers.fire();
    expect(s.w.waiting).toBe(false);
    expect(s.w.heldBytes).toBe(0);
    expect(s.timers.timers.size).toBe(0);
    for (const a of accs) {
      const stored = s.store.load(a.id)!;
      expect(stored.epoch).toBe(a.history.epoch);
      expect(stored.seq).toBe(a.history.sent);
      expect(a.history.sent).toBe(a.history.seq);
      // Every stored frame was numbered in its epoch; none from the epoch before (rows of it gone).
      expect(stored.entries.every((e) => e.frame.includes(`"epoch":"${a.history.epoch}"`))).toBe(true);
    }
    const seq = broken.history.sent;
    // Stored again before it is sent, as any account.
    s.w.write([s.record(broken)]);
    expect(s.store.load(broken.id)!.entries.map((e) => e.seq)).toEqual([seq + 1]);
    // A restart: the broken account's old position, or a position of the new epoch from before its
    // write, resumes recovered:false; its latest position resumes with what followed.
    const restarted = s.store.load(broken.id)!;
    const h = new AccountHistory(restarted.epoch, restarted.seq, limits, restarted.entries);
    expect(h.replay(before.get(broken.id)!, NOW).recovered).toBe(false);
    expect(h.replay({ epoch: broken.history.epoch, seq: 1 }, NOW).recovered).toBe(seq === 1);
    expect(h.replay({ epoch: broken.history.epoch, seq }, NOW)).toEqual({ recovered: true, entries: [expect.objectContaining({ seq: seq + 1 })] });
    // An account that stayed under the bound kept every frame: its old position resumes with all of them.
    const kept = accs.find((a) => !s.overflowed.includes(a.id));
    if (kept) {
      const st = s.store.load(kept.id)!;
      const hk = new AccountHistory(st.epoch, st.seq, limits, st.entries);
      const r = hk.replay(before.get(kept.id)!, NOW);
      expect(r.recovered).toBe(true);
    }
    expect(s.lines.filter((l) => /stored again/.test(l.msg))).toHaveLength(1);
  });

  it('without overflow nothing changes: every frame waits, then is written and sent in order', () => {
    const s = setup(64 * 1024 * 1024);
    const a = s.account('a');
    s.disk.full = true;
    for (let i = 0; i < 30; i++) s.w.write([s.record(a)]);
    expect(s.delivered.get('a')).toBeUndefined();
    s.disk.full = false;
    s.timers.fire();
    expect(s.delivered.get('a')!.map((d) => d.seq)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(s.overflowed).toEqual([]);
  });
});
