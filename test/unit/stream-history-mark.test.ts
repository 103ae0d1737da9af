// The /v1/stream history's periodic "still alive" mark (AccountStreams.touch, every quarter of
// STREAM_HISTORY_MAX_AGE_MS) on a full DATA_DIR: one log line an episode (FullDisk's), the mark tried
// again every STORAGE_CHECK_MS until it is written. Before, each period's failed mark logged
// `stream history failed` (every 30 s for as long as the disk stayed full). A real SQLite gateway
// database whose marks fail as a full disk makes them fail, timers in the test's hands; a period
// runs touch() as the hub's timer does (its guard logs what touch throws).
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { openDb } from '../../src/store/db.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { StreamHistoryStore } from '../../src/store/streamHistory.js';
import { AccountStreams, type AccountStreamDeps } from '../../src/stream/accounts.js';
import { AccountHistory } from '../../src/stream/history.js';
import type { Outbox } from '../../src/stream/outbox.js';
import type { AccountState } from '../../src/stream/state.js';
import type { Topics } from '../../src/stream/topics.js';
import { errorMessage } from '../../src/util/errorMessage.js';
import { failWhenFull, ManualScheduler } from '../helpers/fullDisk.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();

describe('the stream history\'s alive mark on a full disk', () => {
  it('logs one line an episode, not one a period, and is written once there is room', () => {
    const db = openDb(tempDir(cleanup, 'tagw-history-mark-'));
    cleanup.dbs.push(db);
    const disk = failWhenFull(db, [['stream_epochs', 'UPDATE']]);
    const lines: Array<{ level: string; msg: string }> = [];
    const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l) as (typeof lines)[number]));
    const scheduler = new ManualScheduler();
    let now = 1_700_000_000_000;
    const history = new StreamHistoryStore(db);
    const deps = {
      config: { streamHistoryMaxEvents: 10_000, streamHistoryMaxAgeMs: 120_000 } as Config,
      log, clock: { now: () => now }, history, fullDisk: new FullDisk({ log, retryMs: 1_000 }), scheduler,
      shards: { onDeath: () => () => undefined },
    } as unknown as AccountStreamDeps;
    const streams = new AccountStreams(deps, {} as Topics, {} as Outbox);
    history.write([{ accountId: 'a', epoch: 'e1', seq: 0, deal: { ticket: 0, timeMsc: 0 }, entries: [], keepFrom: 1 }], now);
    streams.accounts.set('a', { id: 'a', history: new AccountHistory('e1', 0, { maxEvents: 10_000, maxAgeMs: 120_000 }) } as unknown as AccountState);
    const period = () => {
      // The hub's timer: stream history marks, its guard logging what throws.
      try {
        streams.touch();
      } catch (err) {
        log.error('stream history failed', { err: errorMessage(err) });
      }
    };
    disk.full = true;
    for (let i = 0; i < 10; i++) {
      now += 30_000;
      period();
    }
    expect(lines.filter((l) => l.msg === 'stream history failed')).toEqual([]);
    expect(lines.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([expect.stringMatching(/^DATA_DIR is full: background writes wait/)]);
    expect(scheduler.timers.size).toBe(1);
    expect(history.aliveSince(now - 60_000)).toEqual([]); // the last mark written is from before the disk filled
    disk.full = false;
    now += 1_000;
    scheduler.fire();
    expect(history.aliveSince(now)).toEqual(['a']);
    expect(scheduler.timers.size).toBe(0);
    expect(lines.filter((l) => /DATA_DIR has room again/.test(l.msg))).toHaveLength(1);
    streams.stop();
  });
});
