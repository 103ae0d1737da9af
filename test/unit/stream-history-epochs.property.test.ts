// The /v1/stream account history across epochs on a full DATA_DIR (src/stream/historyWrites.ts,
// src/stream/accounts.ts, docs/storage.md): under random sequences of account frames, rotations
// (a rebind, a 4014: AccountStreams.rotate), a stream released (its hold over, its history dropped
// or the drop waiting for room) then opened again, the death of the accounts' shard thread (the
// epoch goes on: the stream opened again on the new thread, or, that failing, its state let go and
// picked up from the store by the next socket),
// the alive mark, the disk filling and getting room, the retry, and a crash then a restart on the
// same database, nothing a restart loads contradicts a
// frame that was sent: one (epoch, seq) is one frame, whichever run of the gateway sent it; what a
// restart loads holds one epoch's rows only, and no seq of its epoch below one already sent. The
// invariant behind it: a frame is sent only if it is stored, or its epoch is one no disk holds.
// Once there is room and the retry has run, every account's epoch is on disk where it stands.
// The real AccountStreams and HistoryWrites on a real SQLite gateway database whose history writes
// fail as a full disk makes them fail (SQLITE_FULL) while `disk.full` holds, timers in the test's hands.
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import type { StreamOpenResult } from '../../src/runtime/hosts/streamCommands.js';
import { openDb } from '../../src/store/db.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { StreamHistoryStore } from '../../src/store/streamHistory.js';
import { AccountStreams, type AccountStreamDeps } from '../../src/stream/accounts.js';
import { HistoryWrites } from '../../src/stream/historyWrites.js';
import type { Outbox } from '../../src/stream/outbox.js';
import type { Topics } from '../../src/stream/topics.js';
import { failWhenFull, ManualScheduler } from '../helpers/fullDisk.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();
const NOW = 1_700_000_000_000;
const IDS = ['a', 'b'] as const;
const PAD = 'p'.repeat(200);

type Op =
  | { t: 'frame'; accs: number[] }
  | { t: 'rotate'; a: number }
  | { t: 'release'; a: number }
  | { t: 'mark' } | { t: 'full' } | { t: 'room' } | { t: 'retry' } | { t: 'crash' }
  | { t: 'shardDies'; reopened: boolean };

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant('frame' as const), accs: fc.subarray([0, 1], { minLength: 1 }) }), weight: 6 },
  { arbitrary: fc.record({ t: fc.constant('rotate' as const), a: fc.integer({ min: 0, max: 1 }) }), weight: 2 },
  { arbitrary: fc.record({ t: fc.constant('release' as const), a: fc.integer({ min: 0, max: 1 }) }), weight: 1 },
  { arbitrary: fc.constant({ t: 'mark' as const }), weight: 1 },
  { arbitrary: fc.constant({ t: 'full' as const }), weight: 2 },
  { arbitrary: fc.constant({ t: 'room' as const }), weight: 2 },
  { arbitrary: fc.constant({ t: 'retry' as const }), weight: 2 },
  { arbitrary: fc.constant({ t: 'crash' as const }), weight: 1 },
  { arbitrary: fc.record({ t: fc.constant('shardDies' as const), reopened: fc.boolean() }), weight: 2 },
);

const keyOf = (frame: string) => {
  const f = JSON.parse(frame) as { epoch: string; seq: number };
  return { epoch: f.epoch, seq: f.seq, key: `${f.epoch}:${f.seq}` };
};

const config = { streamHistoryMaxEvents: 10_000, streamHistoryMaxAgeMs: 120_000 } as Config;
const OPEN = { platform: 'P5', server: 's', phase: 'connected' } as StreamOpenResult;
const clock = { now: () => NOW };

/** A gateway database whose history writes fail as a full disk makes them fail while `disk.full` holds. */
function database() {
  const db = openDb(tempDir(cleanup, 'tagw-history-epochs-'));
  cleanup.dbs.push(db);
  const disk = failWhenFull(db, [['stream_history', 'INSERT'], ['stream_history', 'DELETE'], ['stream_epochs', 'INSERT'], ['stream_epochs', 'UPDATE'], ['stream_epochs', 'DELETE']]);
  const lines: Array<{ level: string; msg: string }> = [];
  const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l) as (typeof lines)[number]));
  return { db, disk, store: new StreamHistoryStore(db), lines, log };
}

/** Runs of gateways on one database: ops applied as the hub would, every frame sent recorded and
 *  checked against every other frame sent of the same (epoch, seq), by any run. */
class Runs {
  /** Every frame sent, by any run of the gateway: `epoch:seq` -> its text. */
  readonly sent = new Map<string, string>();
  private readonly maxSent = new Map<string, number>();
  private n = 0;
  g: ReturnType<Runs['boot']>;

  constructor(private readonly d: ReturnType<typeof database>, private readonly heldMaxBytes: number) {
    this.g = this.boot();
  }

  /** A gateway's main thread: its account streams and their history writes, the accounts opened. */
  private boot() {
    const { log, store } = this.d;
    const timers = new ManualScheduler();
    const fullDisk = new FullDisk({ log, retryMs: 1_000 });
    // The accounts' shard: its thread's death (ShardSet.onDeath), and whether the new thread answers
    // the stream.open that opens their streams again there (AccountStreams.reopen).
    const shard = { die: (_shard: number): void => undefined, answers: true };
    const call = (_id: string, op: string) => op !== 'stream.open' ? Promise.resolve()
      : shard.answers ? Promise.resolve(OPEN) : Promise.reject(new Error('the new thread did not answer'));
    const deps = {
      config, log, clock, history: store, fullDisk, scheduler: timers, inflight: { draining: false },
      shards: { shardFor: () => 0, onDeath: (l: (shard: number) => void) => { shard.die = l; return () => undefined; }, call },
    } as unknown as AccountStreamDeps;
    const streams = new AccountStreams(deps, { shardClock: clock, noteServer: () => undefined } as unknown as Topics, {} as Outbox);
    const w = new HistoryWrites({ log, clock, history: store, fullDisk, scheduler: timers }, {
      deliver: (acc, entries) => {
        if (entries.length > 0) acc.history.markSent(entries.at(-1)!.seq);
        for (const e of entries) {
          const k = keyOf(e.frame);
          const before = this.sent.get(k.key);
          if (before !== undefined) expect(e.frame, `${k.key} sent twice, as two frames`).toBe(before);
          this.sent.set(k.key, e.frame);
          this.maxSent.set(k.epoch, Math.max(this.maxSent.get(k.epoch) ?? 0, k.seq));
        }
      },
      // As AccountEvents does: a new epoch (its sockets told 4014).
      overflow: (acc) => streams.rotate(acc),
      kept: (acc) => streams.accounts.get(acc.id) === acc,
    }, this.heldMaxBytes);
    streams.onEpoch = (acc) => w.epochBegun(acc); // as AccountEvents wires them
    const accs = IDS.map((id) => streams.noteOpen(id, OPEN));
    return { timers, streams, w, accs, shard };
  }

  /** The accounts' shard thread dies; the new thread answers the stream.open that opens their
   *  streams again, or not (then their state goes). Then a socket of each comes back (a state let go
   *  of is picked up from the store). */
  async shardDies(reopened: boolean): Promise<void> {
    const g = this.g;
    g.shard.answers = reopened;
    g.shard.die(0);
    await new Promise((r) => setImmediate(r)); // the reopen's answer
    IDS.forEach((id, i) => {
      expect(g.streams.accounts.get(id) === g.accs[i], `${id}: the state stays unless the new thread did not answer`).toBe(reopened);
      g.accs[i] = g.streams.noteOpen(id, OPEN);
    });
  }

  apply(o: Op): void {
    const g = this.g;
    switch (o.t) {
      case 'frame':
        g.w.write(o.accs.map((i) => {
          const acc = g.accs[i]!;
          return { acc, epoch: acc.history.epoch, entry: acc.history.append('POSITIONS', JSON.stringify({ n: this.n++, pad: PAD }), NOW) };
        }));
        break;
      case 'rotate':
        g.streams.rotate(g.accs[o.a]!);
        break;
      case 'release': {
        // Its last socket gone and its hold over (accounts.ts releaseIfUnused: the stream released,
        // its history dropped, or on a full disk the drop waiting for room), then a new socket: a
        // new epoch, the waiting drop not done after it.
        const acc = g.accs[o.a]!;
        g.streams.releaseIfUnused(acc.id);
        vi.advanceTimersByTime(config.streamHistoryMaxAgeMs);
        expect(g.streams.accounts.has(acc.id)).toBe(false);
        g.accs[o.a] = g.streams.noteOpen(acc.id, OPEN);
        break;
      }
      case 'mark':
        g.streams.touch(); // the periodic alive mark and trim
        break;
      case 'full':
        this.d.disk.full = true;
        break;
      case 'room':
        this.d.disk.full = false;
        break;
      case 'retry':
        g.timers.fire();
        break;
      case 'crash':
        this.checkLoad();
        this.g = this.boot(); // the waiting frames (never sent) and timers are gone with the process
        this.checkLoad();
        break;
      case 'shardDies':
        throw new Error('a shard death waits for the reopen\'s answer: Runs.shardDies');
    }
  }

  /** What a restart loads agrees with every frame sent: one epoch's rows, each as sent, its seq at or past the last sent. */
  checkLoad(): void {
    for (const id of IDS) {
      const st = this.d.store.load(id);
      if (!st) continue;
      for (const e of st.entries) {
        const k = keyOf(e.frame);
        expect(k.epoch, `${id}: a row of another epoch than ${st.epoch} (${k.key})`).toBe(st.epoch);
        expect(k.seq).toBe(e.seq);
        const s = this.sent.get(k.key);
        if (s !== undefined) expect(e.frame, `${id}: stored ${k.key} is not the frame sent`).toBe(s);
      }
      expect(st.seq, `${id}: stored at ${st.epoch}:${st.seq}, below a frame sent`).toBeGreaterThanOrEqual(this.maxSent.get(st.epoch) ?? 0);
    }
  }

  /** Room, and the retry: nothing waits, and every account's epoch is on disk where it stands. */
  settle(): void {
    this.checkLoad();
    this.d.disk.full = false;
    this.g.timers.fire();
    expect(this.g.w.waiting).toBe(false);
    for (const acc of this.g.accs) {
      const st = this.d.store.load(acc.id)!;
      expect({ epoch: st.epoch, seq: st.seq }).toEqual({ epoch: acc.history.epoch, seq: acc.history.sent });
      expect(acc.history.sent).toBe(acc.history.seq);
    }
    this.checkLoad();
    this.g.streams.stop();
  }
}

describe('stream history epochs on a full disk', () => {
  // The retention hold's timer (a released stream's): advanced by the 'release' op.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('a restart never contradicts a frame that was sent (same epoch and seq, same frame), through rotations, overflows, shard deaths and crashes', async () => {
    const d = database();
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), fc.integer({ min: 700, max: 2_000 }), async (ops, heldMaxBytes) => {
      d.disk.full = false;
      d.db.exec('DELETE FROM stream_history; DELETE FROM stream_epochs');
      const runs = new Runs(d, heldMaxBytes);
      for (const o of ops) {
        if (o.t === 'shardDies') await runs.shardDies(o.reopened);
        else runs.apply(o);
      }
      runs.settle();
    }), {
      numRuns: 1000,
      examples: [
        // What fast-check found before: a rotation while the disk is full (its drop and write fail),
        // the new epoch's first frame written once there is room over the old epoch's rows.
        [[{ t: 'frame', accs: [1] }, { t: 'frame', accs: [1] }, { t: 'full' }, { t: 'rotate', a: 1 }, { t: 'frame', accs: [1] }], 700],
        // b over the bound (a's frame waits), room, b rotated: its new epoch on disk at seq 0 while
        // its frames still went out unstored (a restart would number them again).
        [[{ t: 'full' }, { t: 'frame', accs: [0, 1] }, { t: 'room' }, { t: 'rotate', a: 1 }, { t: 'frame', accs: [1] }], 700],
      ],
    });
  }, 120_000); // 1,000 runs: 5-9 s alone, over the default 20 s beside other files on a loaded 2-vCPU machine

  it('a rotation on a full disk is written fresh once there is room, before its first frame is sent; a crash before loads the epoch before, as sent', () => {
    const d = database();
    const runs = new Runs(d, 64 * 1024 * 1024);
    const [a] = runs.g.accs;
    runs.apply({ t: 'frame', accs: [0] });
    runs.apply({ t: 'frame', accs: [0] });
    const old = a!.history.epoch;
    runs.apply({ t: 'full' });
    runs.apply({ t: 'rotate', a: 0 }); // before: its drop and write failed, 'stream epoch not stored'
    const epoch = a!.history.epoch;
    expect(d.lines.filter((l) => l.level !== 'info').map((l) => l.msg)).toEqual([expect.stringMatching(/^DATA_DIR is full: background writes wait/)]);
    runs.apply({ t: 'frame', accs: [0] });
    expect(runs.sent.has(`${epoch}:1`)).toBe(false); // it waits for its epoch's write
    // Still full: a restart would load the epoch before, its rows as they were sent.
    expect(d.store.load('a')).toMatchObject({ epoch: old, seq: 2, entries: [{ seq: 1 }, { seq: 2 }] });
    runs.checkLoad();
    runs.apply({ t: 'room' });
    runs.apply({ t: 'retry' });
    expect(runs.sent.has(`${epoch}:1`)).toBe(true);
    // The epoch before's rows went in the same transaction (before: its seq 2 stayed, under the new epoch).
    expect(d.store.load('a')).toMatchObject({ epoch, seq: 1, entries: [{ seq: 1, frame: runs.sent.get(`${epoch}:1`) }] });
    runs.settle();
  });

  it('an account over the bound, rotated as room returns, keeps its new epoch off the disk while its frames go out unstored', () => {
    const d = database();
    const runs = new Runs(d, 700); // one frame waits at most
    const [, b] = runs.g.accs;
    runs.apply({ t: 'full' });
    runs.apply({ t: 'frame', accs: [0, 1] }); // a's frame waits; b's does not fit: b begins a new epoch, unstored
    runs.apply({ t: 'room' }); // the retry has not run yet
    runs.apply({ t: 'rotate', a: 1 }); // before: written at once, at seq 0
    const epoch = b!.history.epoch;
    expect(d.store.load('b')?.epoch).not.toBe(epoch);
    runs.apply({ t: 'frame', accs: [1] });
    expect(runs.sent.has(`${epoch}:1`)).toBe(true); // sent unstored: no disk holds its epoch
    expect(d.store.load('b')?.epoch).not.toBe(epoch);
    runs.checkLoad();
    runs.apply({ t: 'retry' }); // written where it stands; stored before sent from then on
    expect(d.store.load('b')).toMatchObject({ epoch, seq: 1, entries: [] });
    runs.apply({ t: 'frame', accs: [1] });
    expect(d.store.load('b')).toMatchObject({ epoch, seq: 2, entries: [{ seq: 2, frame: runs.sent.get(`${epoch}:2`) }] });
    runs.settle();
  });
});
