// The /v1/stream history's retention drop on a full DATA_DIR (AccountStreams.releaseIfUnused: an
// account's stream kept STREAM_HISTORY_MAX_AGE_MS after its last socket, then its history dropped).
// Before, a drop that met the full disk logged `stream history not dropped` and was never tried again:
// the rows stayed, and a restart within the age limit picked the ended stream up again. Now it waits
// like the other background writes (writer `stream history drop`), tried again every retryMs, one log
// line an episode, until it is done. A stream of the account begun again meanwhile takes its place:
// the drop is not done after it (it would delete the new epoch's rows). A real SQLite gateway
// database whose deletes fail as a full disk makes them fail; the retention and retry timers in the
// test's hands.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { openDb } from '../../src/store/db.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { StreamHistoryStore } from '../../src/store/streamHistory.js';
import { AccountStreams, type AccountStreamDeps } from '../../src/stream/accounts.js';
import type { Outbox } from '../../src/stream/outbox.js';
import type { Topics } from '../../src/stream/topics.js';
import type { StreamOpenResult } from '../../src/runtime/hosts/streamCommands.js';
import { failWhenFull, ManualScheduler } from '../helpers/fullDisk.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();
const MAX_AGE = 120_000;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});
afterEach(() => {
  vi.useRealTimers();
});

function boot() {
  const db = openDb(tempDir(cleanup, 'tagw-history-drop-'));
  cleanup.dbs.push(db);
  const disk = failWhenFull(db, [['stream_epochs', 'DELETE'], ['stream_history', 'DELETE']]);
  const lines: Array<{ level: string; msg: string; what?: string }> = [];
  const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l) as (typeof lines)[number]));
  const scheduler = new ManualScheduler();
  const now = 1_700_000_000_000;
  const history = new StreamHistoryStore(db);
  const deps = {
    config: { streamHistoryMaxEvents: 10_000, streamHistoryMaxAgeMs: MAX_AGE } as Config,
    log, clock: { now: () => now }, history, fullDisk: new FullDisk({ log, retryMs: 1_000 }), scheduler,
    inflight: { draining: false },
    shards: { call: () => Promise.resolve({}), shardFor: () => 0, threadId: () => 1, onDeath: () => () => undefined },
  } as unknown as AccountStreamDeps;
  const streams = new AccountStreams(deps, { shardClock: { now: () => now } } as unknown as Topics, {} as Outbox);
  const open: StreamOpenResult = { platform: 'P5', server: 'Sim', phase: 'connected' } as StreamOpenResult;
  // The account's stream, its history on disk (an entry of its epoch), its last socket gone: held.
  const acc = streams.noteOpen('a', open);
  history.write([{ accountId: 'a', epoch: acc.history.epoch, seq: 1, deal: { ticket: 0, timeMsc: 0 }, entries: [{ seq: 1, at: now, frame: '{}' }], keepFrom: 1 }], now);
  streams.releaseIfUnused('a');
  return { db, disk, lines, scheduler, history, streams, open, epoch: acc.history.epoch };
}

describe("the stream history's retention drop on a full disk", () => {
  it('waits for room, one log line an episode, and is done once there is room', () => {
    const { disk, lines, scheduler, history, streams } = boot();
    disk.full = true;
    vi.advanceTimersByTime(MAX_AGE); // the retention time is over: the stream is released, its history dropped
    expect(streams.accounts.has('a')).toBe(false);
    expect(history.load('a')).toBeDefined(); // the drop waits
    expect(lines.filter((l) => l.msg === 'stream history not dropped')).toEqual([]);
    scheduler.fire(); // still full: held again, no second line
    expect(lines.filter((l) => l.level === 'error' || l.level === 'warn')).toEqual([
      expect.objectContaining({ msg: expect.stringMatching(/^DATA_DIR is full: background writes wait/), what: 'stream history drop' }),
    ]);
    disk.full = false;
    scheduler.fire();
    expect(history.load('a')).toBeUndefined();
    expect(history.aliveSince(0)).toEqual([]);
    expect(scheduler.timers.size).toBe(0);
    expect(lines.filter((l) => /DATA_DIR has room again/.test(l.msg))).toHaveLength(1);
    streams.stop();
  });

  it('a stream of the account begun again before the drop is done takes its place: the drop is not done after it', () => {
    const { disk, scheduler, history, streams, open, epoch } = boot();
    disk.full = true;
    vi.advanceTimersByTime(MAX_AGE);
    expect(history.load('a')?.epoch).toBe(epoch);
    disk.full = false;
    // A client opens the account's stream again: the stream that ended is not picked up, a new epoch
    // begins, and is written (HistoryWrites writes it fresh: the rows of the one before go).
    const again = streams.noteOpen('a', open);
    expect(again.history.epoch).not.toBe(epoch);
    history.write([{ accountId: 'a', epoch: again.history.epoch, seq: 0, deal: { ticket: 0, timeMsc: 0 }, entries: [], keepFrom: 1, fresh: true }], Date.now());
    scheduler.fire();
    expect(history.load('a')).toMatchObject({ epoch: again.history.epoch, entries: [] });
    expect(scheduler.timers.size).toBe(0);
    streams.stop();
  });
});
