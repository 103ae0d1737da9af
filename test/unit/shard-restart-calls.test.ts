// What a shard's new thread gets of the calls its dead thread had not answered (ShardSet supervision,
// src/runtime/shardSet.ts): each call that may run again exactly once, in order; a stream.close never
// (it lets go of an open the dead thread held: on the new thread it would take a reconnect's open
// and drop that stream under its socket); a call refused at the death (not to be run again) or past
// its deadline never, however many starts of the thread fail meanwhile.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { ShardSet } from '../../src/runtime/shardSet.js';
import { until } from '../helpers/until.js';

const workerFile = fileURLToPath(new URL('../helpers/streamCountShard.mjs', import.meta.url));
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function start(callTimeoutMs?: number): Promise<{ set: ShardSet; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tagw-shard-restart-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const set = new ShardSet({
    shards: 1, dataDir: dir, settings: shardSettings({}), log: createLogger('silent'), workerFile,
    ...(callTimeoutMs ? { callTimeoutMs } : {}),
  });
  cleanup.push(() => set.close());
  await set.start();
  return { set, dir };
}

interface Ping { opens: Record<string, number>; received: Array<{ op: string; tag: string | null }> }
const ping = (set: ShardSet) => set.callShard(0, 'shard.ping', {}) as unknown as Promise<Ping>;
/** Kills the thread with the calls made in the same turn before it unanswered (one message). */
const die = (set: ShardSet) => set.callShard(0, 'seat.get', { seatId: 'die' }, { retryOnRestart: false }).catch(() => undefined);

describe('ShardSet: calls across the death of a shard thread', () => {
  it('a stream.close the dead thread did not answer is done, not sent to the new thread (where it took the open sent again before it)', async () => {
    const { set } = await start();
    await set.callShard(0, 'stream.open', { accountId: 'a' });
    // A socket's open under way and another socket's close under way when the thread dies.
    const open = set.callShard(0, 'stream.open', { accountId: 'a' });
    const close = set.callShard(0, 'stream.close', { accountId: 'a' });
    void die(set);
    expect(await close).toEqual({ ok: true });
    await open;
    // The new thread holds the open sent again, as the caller counts it; the close was the dead thread's.
    const p = await ping(set);
    expect(p.opens).toEqual({ a: 1 });
    expect(p.received.map((r) => r.op)).toEqual(['stream.open', 'shard.ping']);
  });

  it('while its new starts fail, each call that may run again reaches the thread once; one refused at a death never', async () => {
    const { set, dir } = await start();
    const deaths = set.restarts();
    writeFileSync(join(dir, 'down'), '');
    await die(set);
    // Made while the shard is down: kept for the next thread, or refused at the next death.
    const kept = set.callShard(0, 'seat.get', { seatId: 'kept', tag: 'kept' } as never);
    const refused = set.callShard(0, 'seat.get', { seatId: 'once', tag: 'refused' } as never, { retryOnRestart: false }).then(() => 'ran', (e: Error) => e.message);
    // Two more starts fail with them waiting.
    await until(() => set.restarts() >= deaths + 3, 'two failed starts', 15_000);
    expect(await refused).toMatch(/restarted before replying/);
    rmSync(join(dir, 'down'));
    await until(() => set.allReady(), 'the shard up again', 15_000);
    await kept;
    const p = await ping(set);
    expect(p.received).toEqual([{ op: 'seat.get', tag: 'kept' }, { op: 'shard.ping', tag: null }]);
  });

  it('a call past its deadline while the shard is down never reaches the thread that comes up', async () => {
    const { set, dir } = await start(300);
    writeFileSync(join(dir, 'down'), '');
    await die(set);
    const expired = set.callShard(0, 'seat.get', { seatId: 'late', tag: 'expired' } as never).then(() => 'ran', (e: Error) => e.message);
    expect(await expired).toMatch(/did not answer seat\.get in time/);
    rmSync(join(dir, 'down'));
    await until(() => set.allReady(), 'the shard up again', 15_000);
    const p = await ping(set);
    expect(p.received).toEqual([{ op: 'shard.ping', tag: null }]);
  });
});
