// Cluster mode's account stream (docs/cluster.md "Streams and resume"): one numbering per account
// for the whole cluster, made by the account's owner and kept in JetStream, so every node sends the
// same seq and a client resumes on any node. The port the stream edge uses; src/cluster/
// clusterStreamHistory.ts implements it. Without it (one node) nothing here is used.
import type { DealMark } from '../store/streamHistory.js';
import type { StreamEvent } from '../runtime/hosts/streamCommands.js';
import type { Replay, StreamPosition } from './history.js';

export interface SharedFrame {
  epoch: string; seq: number; frame: string; /** an epoch marker (seq 0) of a rebound */ rebound?: boolean;
  /** Not a frame: the stream continues after (epoch, seq), which is not after the frames this node
   *  had (a later owner continues from before them: an earlier owner's writes stored after its fence). */
  rewind?: boolean;
}

/** A numbered frame as stored: with the deal mark a next owner continues from, and the lease epoch
 *  under which its owner took the account's role (docs/cluster.md "Fencing the history"). */
export type StoredFrame = SharedFrame & { deal: DealMark; lease?: number };

export interface SharedHistory {
  /** This node holds the account's lease: it numbers the account's events. */
  owns(accountId: string): boolean;
  /** The lease is still this node's, also while being handed over: it may store what it numbered. */
  holds(accountId: string): boolean;
  /** The epoch of the account's lease while this node holds it (PostgreSQL's fencing epoch). */
  leaseEpoch(accountId: string): number | undefined;
  /** Registers what a handover of this node's accounts waits for (within `boundMs`) before the
   *  leases are released: the frames numbered so far, stored. */
  onHandingOver(settled: (boundMs: number) => Promise<void>): void;
  /** Runs `listener` with the accounts this node acquires (once its shards run them). */
  onAcquired(listener: (accountIds: string[]) => void): void;
  /** Runs `listener` with an account owned here whose shard stream was closed by every node's
   *  sockets (or their nodes' departures) and is open again: events meanwhile were not emitted. */
  onReopened(listener: (accountId: string) => void): void;
  /** The account's stream is kept: a client may still resume in it (its history did not age out). */
  kept(accountId: string): Promise<boolean>;
  /** Where a new owner numbers from: the stored epoch continued (`storedAt`: when its head was
   *  stored), or `newEpoch` started (`storedAt` null). With `lease` (an owner's lease epoch) its
   *  tenure is fenced in the history first. */
  takeOver(accountId: string, newEpoch: string, startDeal: DealMark, lease?: number): Promise<{ epoch: string; seq: number; deal: DealMark; continued: boolean; storedAt: number | null }>;
  /** The owner began another epoch (continuity lost; `rebound`: the account was bound to another login). */
  startEpoch(accountId: string, epoch: string, deal: DealMark, rebound?: boolean, lease?: number): Promise<void>;
  /** Stores numbered frames; resolves once all are stored (only then are they sent). */
  append(accountId: string, frames: readonly StoredFrame[]): Promise<void>;
  /** Stores a stored frame again (a new msg id, `again`) so it is the account's last stored message. */
  republish(accountId: string, frame: StoredFrame, again: string): Promise<void>;
  replay(accountId: string, since: StreamPosition): Promise<Replay>;
  /** The owner's frames as they are stored, after `since` (replayed first) or from now on (from
   *  `position`, the head, stored at `storedAt`). */
  follow(
    accountId: string, since: StreamPosition | null, onFrame: (f: SharedFrame) => void, onBreak: (epoch: string, rebound: boolean, at?: number) => void,
  ): Promise<{ feed: SharedFeed; position: StreamPosition | null; recovered: boolean; storedAt: number | null }>;
}

export interface SharedFeed {
  close(): void;
  /** The feed began with nothing stored (position null): the epoch the node took since. */
  seek(position: StreamPosition): void;
}

/** An account's part in the shared stream on this node (AccountState.shared). */
export interface SharedState {
  role: 'owner' | 'follower';
  /** While the role is being taken (takeOver, or a feed opening): sockets' streams and the
   *  shard's account events wait for it. */
  ready: Promise<void> | null;
  /** The history is still the placeholder made before the first role was taken. */
  placeholder: boolean;
  /** Tries of the role that failed (SharedAccounts.gate: a fresh socket that waited through one is told). */
  failedTries: number;
  /** Where the node's first role began its history (the stream's head as that role read it) and when
   *  JetStream stored the frame there (null: nothing was, the epoch began there): SharedAccounts.gate
   *  places a fresh socket that waited for that role there, or tells it. */
  first?: { epoch: string; seq: number; storedAt: number | null };
  held: StreamEvent[];
  /** Frames the feed delivered before the history was set from its position. */
  early: SharedFrame[] | null;
  feed: SharedFeed | null;
  /** The latest POSITIONS / ORDERS data the stream carried: a follower's snapshots, consistent with its seq. */
  lastData: { POSITIONS?: string; ORDERS?: string };
  /** The owner's highest-numbered frame JetStream acknowledged (this node's epoch): what a retried
   *  store stores again after it, so the account's last stored message is the highest seq. */
  lastStored?: StoredFrame;
  /** Taking the role failed (JetStream unreachable): serving a local epoch, the role taken again at
   *  this time (SharedAccounts.checkRoles). */
  retryAt?: number;
  /** The owner's lease epoch when it took the role (its fence's): what its frames carry. A lease
   *  lost and taken again since (another owner may have numbered meanwhile) takes the role again. */
  lease?: number;
}

const DATA = '"data":';

/** The frame's type and data (frames are built by accountFrame: type first, data last). */
export function frameParts(frame: string): { type: string; data: string } {
  const type = frame.slice(9, frame.indexOf('"', 9));
  const at = frame.indexOf(DATA);
  return { type, data: at < 0 ? '' : frame.slice(at + DATA.length, -1) };
}

/** A full-list change's data as a snapshot's (`"snapshot":false` -> true; the lists are the same). */
export function asSnapshot(data: string): string {
  return data.startsWith('{"snapshot":false') ? `{"snapshot":true${data.slice(17)}` : data;
}
