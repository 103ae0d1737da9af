// How calls leave the main thread for a shard: a lone call at once; calls made while others are in
// flight gather until the end of the turn and leave in one message (one wake-up of the shard, and
// there one commit for the batch's bookings: src/store/commitGroup.ts). uWS runs each request's
// handler in its own callback (and a trading call after a setImmediate), so "the same turn" means
// separate callbacks, as setImmediate makes them here.
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { afterThisRead } from '../../src/http/endOfRead.js';
import { createLogger } from '../../src/log.js';
import { shardSettings } from '../../src/runtime/settings.js';
import { ShardSet } from '../../src/runtime/shardSet.js';

const workerFile = fileURLToPath(new URL('../helpers/batchEchoShard.mjs', import.meta.url));
const sets: ShardSet[] = [];
afterEach(async () => {
  for (const s of sets.splice(0)) await s.close();
});

async function start(): Promise<ShardSet> {
  const set = new ShardSet({ shards: 1, dataDir: '/nonexistent', settings: shardSettings({}), log: createLogger('silent'), workerFile });
  sets.push(set);
  await set.start();
  return set;
}
const batchOf = (p: Promise<unknown>) => p.then((r) => (r as { batch: number }).batch);

describe('ShardSet: calls to a shard', () => {
  it('a lone call leaves at once, alone', async () => {
    const set = await start();
    expect(await batchOf(set.callShard(0, 'shard.ping', {}))).toBe(1);
    expect(await batchOf(set.callShard(0, 'shard.ping', {}))).toBe(1);
  });

  it('calls from separate callbacks while one is in flight leave together at the end of the turn', async () => {
    const set = await start();
    // The first call stays in flight until released (a fast reply would otherwise land before the
    // immediates run, and the first of them would leave alone).
    const first = batchOf(set.callShard(0, 'seat.get', { seatId: 'hold' }));
    const rest = await Promise.all(
      Array.from({ length: 6 }, () => new Promise<number>((resolve) => setImmediate(() => resolve(batchOf(set.callShard(0, 'shard.ping', {})))))),
    );
    expect(await batchOf(set.callShard(0, 'seat.get', { seatId: 'release' }))).toBe(1);
    expect(await first).toBe(1);
    expect(rest).toEqual([6, 6, 6, 6, 6, 6]);
  });

  it('the trading calls of one read resume together after it, so theirs leave in one message even with nothing in flight', async () => {
    const set = await start();
    // As uWS runs the handlers of the requests of one read: each waits for the read to end, then calls.
    const order: string[] = [];
    const calls = Array.from({ length: 5 }, (_, i) => {
      if (i === 2) setImmediate(() => order.push('other immediate'));
      return afterThisRead().then(() => {
        order.push(`request ${i}`);
        return batchOf(set.callShard(0, 'shard.ping', {}));
      });
    });
    expect(await Promise.all(calls)).toEqual([5, 5, 5, 5, 5]);
    expect(order).toEqual(['request 0', 'request 1', 'request 2', 'request 3', 'request 4', 'other immediate']);
  });
});

describe('ShardSet: call deadlines', () => {
  it('a call the shard never answers is refused 503 at its own deadline, whatever other calls do meanwhile', async () => {
    const set = new ShardSet({ shards: 1, dataDir: '/nonexistent', settings: shardSettings({}), log: createLogger('silent'), workerFile, callTimeoutMs: 200 });
    sets.push(set);
    await set.start();
    const t0 = performance.now();
    const first = set.callShard(0, 'seat.get', { seatId: 'hold' }).then(() => 'answered', (e: Error) => ({ e, at: performance.now() - t0 }));
    await new Promise((r) => setTimeout(r, 100));
    const t1 = performance.now();
    const second = set.callShard(0, 'seat.get', { seatId: 'hold' }).then(() => 'answered', (e: Error) => ({ e, at: performance.now() - t1 }));
    // A call answered in between moves neither deadline.
    expect(await batchOf(set.callShard(0, 'shard.ping', {}))).toBeGreaterThan(0);
    const [a, b] = await Promise.all([first, second]);
    for (const r of [a, b]) {
      if (typeof r === 'string') throw new Error('a held call was answered');
      expect(r.e.message).toMatch(/did not answer seat\.get in time/);
      expect((r.e as unknown as { status: number }).status).toBe(503);
      expect(r.at).toBeGreaterThanOrEqual(199);
    }
    // The first expired before the second was due: each at its own deadline, not one shared. On
    // one clock (t0): the second was sent t1 - t0 after the first (100 ms asked of a timer that may
    // fire late: ci56 failed comparing with 100), so their deadlines are that far apart, and one
    // shared deadline would refuse both at once.
    const firstAt = (a as { at: number }).at;
    const secondAt = t1 - t0 + (b as { at: number }).at;
    expect(secondAt - firstAt).toBeGreaterThan(50);
    // The shard is still served after the expiries.
    expect(await batchOf(set.callShard(0, 'shard.ping', {}))).toBe(1);
  });
});

describe('ShardSet: a shard that cannot start', () => {
  it('fails the start after 3 attempts with the worker\'s own error, instead of a promise that never settles (the process then exited 0 without a word: nothing else kept it alive)', async () => {
    const failing = fileURLToPath(new URL('../helpers/failingShard.mjs', import.meta.url));
    const set = new ShardSet({ shards: 1, dataDir: '/nonexistent', settings: shardSettings({}), log: createLogger('silent'), workerFile: failing });
    sets.push(set);
    await expect(set.start()).rejects.toThrow(/^shard 0 could not start \(3 attempts\): attempt to write a readonly database$/);
  });
});
