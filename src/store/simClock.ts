// The simulated clock of a data directory (SIM_START, `npm run sim -- --start`): the simulator runs on
// the wall clock plus an offset, fixed when the directory first holds simulator state on it and kept
// here, so a restart goes on from where the market was (plus the time it was down), never back to
// the start over open positions. docs/simulator.md, "Starting the market at a fixed instant".
import type Database from 'better-sqlite3';

/** A start the data directory cannot take: the caller says so in one line and exits 2. */
export class SimClockError extends Error {}

export interface SimClock {
  /** Simulated time = wall clock + offsetMs (0: the wall clock). */
  offsetMs: number;
  /** The instant the simulated clock started at (SIM_START when it was fixed); absent: the wall clock. */
  startMs?: number;
  /** SIM_START unset, the directory's clock kept: the caller warns. */
  kept?: boolean;
}

type Db = Database.Database;
interface Row { start_ms: number; offset_ms: number }

const iso = (ms: number) => new Date(ms).toISOString();

/** Whether the simulator has stored anything (an account, a deal) in this database. */
function holdsSimState(db: Db): boolean {
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('sim_journal', 'sim_state')").pluck().all() as string[];
  return tables.some((t) => db.prepare(`SELECT 1 FROM ${t} LIMIT 1`).get() !== undefined);
}

/**
 * The simulated clock of this database for a start with `startMs` (SIM_START; undefined: unset) at
 * wall time `nowMs`. While the simulator has stored nothing, the setting applies as given (the offset
 * is fixed again at this start: a gateway that never had an account starts its market at SIM_START
 * each time). Once it holds state, the offset stored with it stays: the same SIM_START, or none
 * (`kept`), goes on; another one, or a SIM_START on state made on the wall clock, throws.
 */
export function simClockOf(db: Db, startMs: number | undefined, nowMs: number, where: string): SimClock {
  db.exec('CREATE TABLE IF NOT EXISTS sim_clock (only INTEGER PRIMARY KEY CHECK (only = 0), start_ms INTEGER NOT NULL, offset_ms INTEGER NOT NULL)');
  const row = db.prepare('SELECT start_ms, offset_ms FROM sim_clock WHERE only = 0').get() as Row | undefined;
  if (!holdsSimState(db)) {
    if (startMs === undefined) {
      db.prepare('DELETE FROM sim_clock').run();
      return { offsetMs: 0 };
    }
    const offsetMs = startMs - nowMs;
    db.prepare('INSERT OR REPLACE INTO sim_clock (only, start_ms, offset_ms) VALUES (0, ?, ?)').run(startMs, offsetMs);
    return { offsetMs, startMs };
  }
  if (!row) {
    if (startMs === undefined) return { offsetMs: 0 };
    throw new SimClockError(`${where} holds simulator state (accounts, deals) made on the wall clock: a simulated clock started at ${iso(startMs)} would put the market behind them. ` +
      'Start with an empty data directory to use it, or without it to go on on the wall clock');
  }
  if (startMs === undefined) return { offsetMs: row.offset_ms, startMs: row.start_ms, kept: true };
  if (startMs !== row.start_ms) {
    throw new SimClockError(`${where}: its simulated clock started at ${iso(row.start_ms)} and holds accounts and deals on it; it cannot start again at ${iso(startMs)} over them. ` +
      `Give ${iso(row.start_ms)} (or nothing) to go on, or an empty data directory to start at ${iso(startMs)}`);
  }
  return { offsetMs: row.offset_ms, startMs };
}

/** The simulated clock stored in this database (what the last start decided), or undefined (the wall clock). */
export function storedSimClock(db: Db): SimClock | undefined {
  const has = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sim_clock'").get() !== undefined;
  const row = has ? db.prepare('SELECT start_ms, offset_ms FROM sim_clock WHERE only = 0').get() as Row | undefined : undefined;
  return row && { offsetMs: row.offset_ms, startMs: row.start_ms };
}
