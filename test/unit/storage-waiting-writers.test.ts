// Which background writes wait for room on a full DATA_DIR, as /readyz (storage.shardsWaiting,
// storage.mainWaiting: StorageHealth.status(), the route's body) and `tagw status`' disk line (which
// reads /readyz) say it: every writer of a thread whose writes are held, not only the one that met
// the full disk first. Before, an episode named its first writer only: a seat's row held while the
// simulator journal waited showed as 'simulator journal' alone. A thread's FullDisk tells
// StorageHealth as a shard's storage.waiting event does (shardReport), or the main thread's (mainReport).
import { expect, it } from 'vitest';
import { diskLine } from '../../src/cli/commands/admin.js';
import { createLogger } from '../../src/log.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { HeldWrites } from '../../src/store/heldWrites.js';
import { StorageHealth } from '../../src/store/storageHealth.js';
import { ManualClock } from '../helpers/gateway.js';
import { ManualScheduler } from '../helpers/fullDisk.js';

const full = () => Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });

it('two writers of a shard held at once, and two of the main thread: /readyz and the disk line name each; one log line an episode', () => {
  const clock = new ManualClock(1_000);
  const lines: Array<{ level: string; msg: string }> = [];
  const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l) as (typeof lines)[number]));
  const health = new StorageHealth({ dir: '/x', minFreeBytes: 10, checkMs: 50, now: () => clock.now(), freeBytes: () => 100, log: createLogger('silent') });
  health.check();
  const sched = new ManualScheduler();
  const disk = { full: true };
  /** A thread's writers, on its FullDisk: each writes one item, holding it on the full disk. */
  const thread = (report: ConstructorParameters<typeof FullDisk>[0]['report'], ...names: string[]) => {
    const fullDisk = new FullDisk({ log, retryMs: 1_000, ...(report ? { report } : {}) });
    const writers = names.map((what) => {
      const h: HeldWrites<number> = new HeldWrites<number>({ fullDisk, what, scheduler: sched, retry: (items) => write(items) });
      const write = (items: number[]) => h.attempt(() => {
        if (disk.full) throw full();
      }, items);
      return write;
    });
    return writers;
  };
  const [journal, seat] = thread((e) => health.shardReport(1, e), 'simulator journal', 'seat state');
  const [history, mark] = thread((e) => health.mainReport(e), 'stream history', 'stream history mark');
  journal!([1]);
  clock.advance(10);
  seat!([2]);
  seat!([3]); // the same writer again: named once
  history!([1]);
  mark!([2]);
  const st = health.status();
  expect(st).toMatchObject({
    available: false, fullSince: 1_000, reason: "shard 1's background writes wait for room: simulator journal, database or disk is full",
    shardsWaiting: [{ shard: 1, since: 1_000, what: 'simulator journal, seat state' }],
    mainWaiting: { since: 1_010, what: 'stream history, stream history mark' },
  });
  expect(diskLine(st)).toBe("full (shard 1's background writes wait for room: simulator journal, database or disk is full); background writes wait in memory: shard 1 (simulator journal, seat state), main thread (stream history, stream history mark)");
  expect(health.shardEpisodes).toBe(1);
  // One line an episode a thread, naming the first.
  expect(lines.filter((l) => /^DATA_DIR is full/.test(l.msg))).toHaveLength(2);
  // Room: the retries write everything, each thread's episode ends, and so does the disk's.
  disk.full = false;
  sched.fire();
  expect(health.status()).toEqual({ available: true, freeBytes: 100 });
  // A new episode names its own writers only.
  disk.full = true;
  seat!([4]);
  expect(health.status().shardsWaiting).toEqual([{ shard: 1, since: 1_010, what: 'seat state' }]);
});
