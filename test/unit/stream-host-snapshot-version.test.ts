// Shard side of a stream snapshot (src/runtime/hosts/streams.ts, 'stream.snapshot'): the versions it
// answers with are the counts of changes *before its read of the broker began*. A change the
// connection learns while the read is out may or may not be in the lists read; its event is then
// newer than the snapshot and must win. Before, the versions were read after the fetch: a position
// opened while the read was out (its event counted meanwhile) carried the snapshot's count, the
// stream edge applied the stale lists last (a resync) and the stream held them for good (`npm run
// chaos`, schedule 25 of seed 580281107: the last POSITIONS without the last position opened).
import { describe, expect, it } from 'vitest';
import type { AccountEvent } from '../../src/runtime/hosts/accountRegistry.js';
import type { Position } from '../../src/market/orders.js';
import { STREAM_EVENT, type PositionsEventData, type StreamSnapshotResult } from '../../src/runtime/hosts/streamCommands.js';
import { snapshotIsOlder } from '../../src/runtime/hosts/listVersion.js';
import { scriptedRuntime, streamHostOver } from '../helpers/streamHost.js';

const position = (ticket: number) => ({ ticket }) as unknown as Position;

function setup(openedOrders: (fire: (ev: AccountEvent) => void) => Promise<{ positions: Position[]; orders: [] }>) {
  const conn = { openedOrders: () => openedOrders(fire), historyDeals: async () => [] };
  const { rt, fire } = scriptedRuntime('acc', conn);
  const { host, events } = streamHostOver([rt]);
  const positionsEvents = () => events.filter((e) => e.kind === STREAM_EVENT.positions).map((e) => e.data as PositionsEventData);
  return { host, fire, positionsEvents };
}

describe('stream host: a snapshot\'s versions', () => {
  it('a position opened while the broker read is out: its event is newer than the snapshot', async () => {
    const { host, fire, positionsEvents } = setup(async (fire) => {
      const read = { positions: [position(1)], orders: [] as [] }; // the broker's answer, read first
      fire({ type: 'positions', positions: [position(1), position(2)] }); // then #2 opens, before the reply
      return read;
    });
    await host.handlers['stream.open']!({ accountId: 'acc' } as never);
    fire({ type: 'positions', positions: [position(1)] }); // #1 opened earlier: counted before the read
    const snap = await host.handlers['stream.snapshot']!({ accountId: 'acc', timeoutMs: 1_000 } as never) as StreamSnapshotResult;
    const [before, during] = positionsEvents();
    expect(snap.positions.map((p) => p.ticket)).toEqual([1]);
    // The change counted before the read is in the snapshot; the one counted during it wins over it.
    expect(snapshotIsOlder({ src: snap.src, v: snap.posV }, { src: before!.src, v: before!.v })).toBe(false);
    expect(snapshotIsOlder({ src: snap.src, v: snap.posV }, { src: during!.src, v: during!.v })).toBe(true);
  });
});
