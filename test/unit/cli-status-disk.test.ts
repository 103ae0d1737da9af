// `tagw status` on a full DATA_DIR: the `disk:` line says why (/readyz storage.reason) and what waits
// in memory for room, the shards' background writes and the main thread's stream history
// (docs/storage.md); none while the disk has room.
import { expect, it } from 'vitest';
import { diskLine } from '../../src/cli/commands/admin.js';

it('the disk line: the reason, then the shards and the main thread whose writes wait; none with room', () => {
  expect(diskLine({ available: true })).toBeNull();
  expect(diskLine(undefined)).toBeNull();
  expect(diskLine({ available: false })).toBe('full');
  expect(diskLine({
    available: false, reason: '0.0 MiB free, below the 16.0 MiB reserve',
    shardsWaiting: [{ shard: 0, what: 'simulator journal' }, { shard: 1, what: 'seat state' }], mainWaiting: { what: 'stream history' },
  })).toBe('full (0.0 MiB free, below the 16.0 MiB reserve); background writes wait in memory: shard 0 (simulator journal), shard 1 (seat state), main thread (stream history)');
});
