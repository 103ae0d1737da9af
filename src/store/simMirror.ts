// The simulator store's in-memory mirror of one account (src/store/simStore.ts): what its next
// checkpoint writes, and where its request ids' journal rows are.
import type { StoredAccount } from '../sim/persistence.js';
import type { CheckpointRows, CheckpointState } from './simCheckpoint.js';
import type { JournalRef } from './simDirty.js';
import type { RequestRefs } from './requestRefs.js';

/** The in-memory mirror of one account, checkpointed into sim_state. Its positions and active
 *  orders (CheckpointState) are those changed since the last checkpoint (simCheckpoint.ts), not all
 *  of them: a copy of every open position lived as long as the position, and each one the bench
 *  opened was copied by every young-generation scavenge until promoted (issue 19, the p99). The
 *  maps are created by their first entry and dropped by the checkpoint: an empty Map still costs
 *  its table (issue 19, memory per idle account). */
export interface Mirror extends CheckpointState {
  /** Every request id of the last day: where its journal row (which holds its outcome) is. Only
   *  the reference is kept: outcomes held in memory cost ~1 KB per order for a day, and as objects
   *  that outlive young-generation collections they made every scavenge copy them (in-process
   *  idempotent orders: p99 ~2.9 ms with them, ~1.1 ms without). A lookup reads the row; that
   *  happens only when an id comes again (a retry after a lost reply, a restart's recovery). */
  refs: RequestRefs | undefined;
  /** Requests not yet in a checkpointed batch: their ids (refs has where each is). An [id, time,
   *  seq] array per order lived until the checkpoint, ~1 s, past a young-generation scavenge. */
  newRefs: string[];
  checkpointedMs: number;
  /** The rows of the last checkpoint (simCheckpoint.ts): a checkpoint writes only what changed.
   *  Present from the start here (newMirror). */
  rows: CheckpointRows | undefined;
  /** The first journal row since the last checkpoint (none: the checkpoint covers every row). */
  dirtyFrom: JournalRef | undefined;
  /** Its mark (sim_dirty) is committed: rows after the checkpoint are found at a restart. */
  marked: boolean;
}

/** A mirror with every field present from the start, in one order: one hidden class for all of
 *  them. Fields added later (rows at the first checkpoint, dirtyFrom at the first change, marked at
 *  the first commit) gave mirrors three or four shapes, and the checkpoint pass, optimized for the
 *  shapes it had met, was thrown out and recompiled (~15 ms of a compiler thread) when a mirror of
 *  another shape came by, in the middle of an order stream (issue 19, the p99). */
export function newMirror(account: StoredAccount, seq: number, lastTimeMs: number, checkpointedMs: number, lastTicket: number): Mirror {
  return {
    account, positions: undefined, activeOrders: undefined, seq, lastTimeMs, lastTicket, refs: undefined, newRefs: [], checkpointedMs,
    rows: undefined, dirtyFrom: undefined, marked: false,
  };
}
