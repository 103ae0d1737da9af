// The versions of an account's positions and orders lists mean something only against versions
// counted by the same shard stream state (src/runtime/hosts/listVersion.ts). A list counted by
// another one (another node's shard: a snapshot read from an owner about to lose the account, the
// account's stream state there after a handover) with a higher count must not make the stream drop
// the account's own later changes as older. Seen in `npm run chaos` (PostgreSQL restarted, leases
// churning): the new owner's POSITIONS stopped at v 31 of the old owner's count while its own
// events counted 2, 3, ...; the stream held a stale list for good, TRADEs still flowing.
// One gateway: the foreign list enters where the shards' events enter (StreamHub.onShardEvent).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { STREAM_EVENT } from '../../src/runtime/hosts/streamCommands.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { bindAccount, orderSend } from '../helpers/trading.js';

let t: TestGateway;
let id: string;
let key: string;
let s: StreamClient | undefined;

beforeAll(async () => {
  t = await startTestGateway();
  ({ id, key } = await bindAccount(t.url, t.managementKey, 'list-versions'));
});
afterAll(async () => {
  await s?.close();
  await t?.stop();
});

it('a list counted by another stream state with a higher count does not make the account\'s own later changes look older', async () => {
  s = await mustOpen(t.url, { id, apiKey: key, heartbeat: '0' });
  await s.next('POSITIONS', 0); // the snapshot
  // Counted elsewhere: far past anything this gateway's shard has counted for the account.
  t.gw.stream.onShardEvent({ kind: STREAM_EVENT.positions, key: id, data: { src: 7, v: 50, positions: [] } });
  t.gw.stream.onShardEvent({ kind: STREAM_EVENT.orders, key: id, data: { src: 7, v: 50, orders: [] } });
  const from = s.frames.length;
  const sent = await orderSend(t.url, key, id, 'list-versions-1');
  expect(sent.status).toBe(200);
  const ticket = sent.ticket!;
  const listed = await s.until((c) => c.frames.slice(from).some((f) => f.type === 'POSITIONS' && f.data.positions.some((p: { ticket: number }) => p.ticket === ticket)), 8_000, `a POSITIONS frame with #${ticket}`);
  expect(listed).toBe(true);
});
