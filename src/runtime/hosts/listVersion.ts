// Versions of an account's positions and orders lists, between a shard's stream state (which counts
// its change events) and the stream edge (which must not let an older list follow a newer one).
// A count starts at 0 each time a shard makes an account's stream state: after a handover, a lease
// lost and won back, on another node. And a snapshot may come from another node's shard (a socket's
// snapshot sent to an owner about to lose the account). So a version means something only against
// one counted by the same stream state: before, the old owner's snapshot (v 31) made the new owner
// drop its own events (v 2, 3, ...) as older, and POSITIONS stopped following the broker.

/** `src`: the stream state that counted it (random, never 0); `v`: its count. */
export interface ListVersion { readonly src: number; readonly v: number }

/** Nothing known yet. */
export const NO_VERSION: ListVersion = { src: 0, v: 0 };

/** A change event versioned `incoming` is older than the list held (versioned `held`), so it must not
 *  replace it: counted by the same stream state, at or before held's count. */
export function eventIsOlder(incoming: ListVersion, held: ListVersion): boolean {
  return incoming.src === held.src && incoming.v <= held.v;
}

/** A snapshot versioned `snap` (the count when its read of the broker began: every change counted up
 *  to it is in its lists) is older than the list held when that one is a change counted after the
 *  read began (it may be missing from what was read). */
export function snapshotIsOlder(snap: ListVersion, held: ListVersion): boolean {
  return snap.src === held.src && snap.v < held.v;
}
