// A shard's background writes waiting for room on DATA_DIR (src/store/fullDisk.ts), told to the main
// thread as a `storage.waiting` event: once when the shard's episode begins, once more for each other
// writer whose writes wait in it (naming them all), once when it ends, and once at every start of the shard (nothing waits in a fresh one: a restart ends what its last run
// reported). The main thread's StorageHealth shows it (/readyz, /metrics, `tagw status`;
// docs/storage.md). Local to its node: never relayed to other nodes (cluster/streamRelay.ts).
import type { FullDiskEpisode } from '../store/fullDisk.js';

export const STORAGE_EVENT = 'storage.waiting';

declare module './protocol.js' {
  interface ShardEventMap {
    [STORAGE_EVENT]: FullDiskEpisode;
  }
}
