// How long the checkpointer's thread waits before its next run (checkpointWorker.ts), from what its
// last runs found. Pure, so the pacing is tested without the thread or the wall clock.

export interface CheckpointPace {
  /** After a run that found a few new frames: soon, so the WAL is restarted soon after writes pause. */
  intervalMs: number;
  /** After a run that found writes without a pause. */
  busyIntervalMs: number;
  /** Once nothing was committed for idleAfterRuns runs in a row: an idle node is woken this rarely
   *  (a commit meanwhile only appends to the WAL; the next run copies it and restarts the WAL). */
  idleIntervalMs: number;
  idleAfterRuns: number;
}

/** What a run found: writes without a pause, some new frames, or nothing committed since the last. */
export type CheckpointFound = 'busy' | 'some' | 'none';

/** The wait before the next run; `idleRuns` counts the runs in a row that found nothing (this one included). */
export function checkpointWait(p: CheckpointPace, found: CheckpointFound, idleRuns: number): number {
  if (found === 'busy') return p.busyIntervalMs;
  if (found === 'none' && idleRuns >= p.idleAfterRuns) return p.idleIntervalMs;
  return p.intervalMs;
}
