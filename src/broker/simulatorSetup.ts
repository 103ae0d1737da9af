// The simulator of a thread, assembled: its configuration (and replay files) from disk, its
// persistence in SQLite (or memory), its market driven by a timer.
import { dirname } from 'node:path';
import type Database from 'better-sqlite3';
import { Simulator, type Clock } from '../sim/simulator.js';
import { DEFAULT_CONFIG_PATH, loadReplayData, loadSimConfig, type MarketHours } from '../sim/config.js';
import { SqliteSimStore } from '../store/simStore.js';
import { MemorySimStore } from '../store/memorySimStore.js';
import type { CommitGroup } from '../store/commitGroup.js';
import type { FullDisk } from '../store/fullDisk.js';

export interface CreateSimulatorOptions {
  /** SQLite database for simulator state (tables sim_*); omit for in-memory state. */
  readonly db?: Database.Database;
  readonly configPath?: string;
  readonly seed?: number;
  /** `always`: every symbol quotes and trades around the clock; default each symbol's own sessions. */
  readonly marketHours?: MarketHours;
  readonly clock?: Clock;
  /** SIM_START: replayed recordings start at this instant (SimulatorOptions.replayStartMs). */
  readonly replayStartMs?: number;
  /** Drive the market from a timer every N ms (default 20); false for manual advance(). */
  readonly driveMs?: number | false;
  /** Bookings made while it is open share one commit (SqliteSimStore). */
  readonly commitGroup?: CommitGroup;
  /** The first failed write of the SQLite store, once: it refuses writes from then on (simFailStop.ts). */
  readonly onStoreFailure?: (err: unknown) => void;
  /** Writes no request waits for that meet a full disk wait for room (the SQLite store). */
  readonly fullDisk?: FullDisk;
}

/** One simulator for this thread: config (and replay files) from disk, SQLite or memory
 *  persistence, market driven by a timer. */
export function createSimulator(options: CreateSimulatorOptions = {}): Simulator {
  const path = options.configPath ?? DEFAULT_CONFIG_PATH;
  const config = loadSimConfig(path, {
    ...(options.seed !== undefined ? { seed: options.seed } : {}), ...(options.marketHours ? { marketHours: options.marketHours } : {}),
  });
  const store = options.db
    ? new SqliteSimStore(options.db, {
      ...(options.commitGroup ? { commitGroup: options.commitGroup } : {}), ...(options.onStoreFailure ? { onError: options.onStoreFailure } : {}), ...(options.fullDisk ? { fullDisk: options.fullDisk } : {}),
    })
    : new MemorySimStore();
  const sim = new Simulator({ config, store, replay: loadReplayData(config, dirname(path)), ...(options.clock ? { clock: options.clock } : {}),
    ...(options.replayStartMs !== undefined ? { replayStartMs: options.replayStartMs } : {}) });
  if (options.driveMs !== false) sim.start(options.driveMs ?? 20);
  return sim;
}
