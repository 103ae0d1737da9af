// A seat's state rows on a full DATA_DIR (src/runtime/hosts/seats.ts, writer 'seat state'): a row
// that meets the full disk waits in HeldWrites and is tried again every retryMs. A seat's BUILDING row
// held so, then its ACTIVE row written at once when room returned: the retry wrote the BUILDING row
// after it, and the stored state went backwards (healed only when a later read restarted the seat's
// actor). The latest row of a seat wins: the held one is dropped once a newer one is written, or
// replaced by it when that one is held too. A real SQLite gateway database whose seat_state writes
// fail as a full disk makes them fail; the machine's and the retry's timers faked (no time).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/log.js';
import { createSeatHost } from '../../src/runtime/hosts/seats.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { openDb } from '../../src/store/db.js';
import { FullDisk } from '../../src/store/fullDisk.js';
import { runMigrations } from '../../src/store/migrations.js';
import { ManualClock } from '../helpers/gateway.js';
import { failWhenFull } from '../helpers/fullDisk.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();

beforeEach(() => {
  vi.useFakeTimers({ now: 1_700_000_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

function boot() {
  const db = openDb(tempDir(cleanup, 'tagw-seat-held-'));
  cleanup.dbs.push(db);
  runMigrations(db);
  db.exec("INSERT INTO customers (id, name, created_at) VALUES ('c', 'c', 0); INSERT INTO seats (id, customer_id, private_hosting, created_at) VALUES ('seat-1', 'c', 1, 0)");
  const disk = failWhenFull(db, [['seat_state', 'INSERT'], ['seat_state', 'UPDATE']]);
  const logs: Array<{ level: string; msg: string }> = [];
  const log = createLogger('info', {}, (l) => logs.push(JSON.parse(l) as (typeof logs)[number]));
  const host = createSeatHost({ shard: 0, shards: 1, db, log, settings: shardSettings({}), clock: new ManualClock(), emit: () => {}, owns: () => true, fullDisk: new FullDisk({ log, retryMs: 1_000 }) });
  const status = () => (db.prepare("SELECT status FROM seat_state WHERE seat_id = 'seat-1'").get() as { status: string } | undefined)?.status;
  return { db, disk, logs, host, status };
}

describe("a seat's state rows on a full disk", () => {
  it('a held BUILDING row is never written after the ACTIVE row written at once when room returned', () => {
    const { disk, logs, host, status } = boot();
    disk.full = true;
    expect(host.handlers['seat.create']!({ seatId: 'seat-1', readyAt: Date.now() + 300 })).toMatchObject({ status: 'BUILDING_SERVER' });
    expect(status()).toBeUndefined(); // its BUILDING row waits
    disk.full = false;
    vi.advanceTimersByTime(300); // the machine's timer: ACTIVE, written at once (there is room)
    expect(status()).toBe('ACTIVE');
    vi.advanceTimersByTime(1_000); // the retry timer: the held BUILDING row is older than what is stored
    expect(status()).toBe('ACTIVE');
    expect(vi.getTimerCount()).toBe(0);
    expect(logs.filter((l) => /DATA_DIR has room again/.test(l.msg))).toHaveLength(1);
    host.stop();
  });

  it('both rows held: the ACTIVE row replaces the BUILDING row, and the retry writes ACTIVE', () => {
    const { disk, host, status } = boot();
    disk.full = true;
    host.handlers['seat.create']!({ seatId: 'seat-1', readyAt: Date.now() + 300 });
    vi.advanceTimersByTime(300); // ACTIVE meets the full disk too
    expect(status()).toBeUndefined();
    disk.full = false;
    vi.advanceTimersByTime(1_000);
    expect(status()).toBe('ACTIVE');
    expect(vi.getTimerCount()).toBe(0);
    host.stop();
  });
});
