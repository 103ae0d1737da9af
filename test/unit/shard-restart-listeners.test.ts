// What follows a shard's death and restart on the main thread (src/runtime/shardSet.ts): when its
// thread dies (ShardSet.onDeath) the stream state of its accounts is dropped, their sockets closed
// with RUNTIME_RESTARTED (src/stream/accounts.ts), whether or not a new thread ever comes up; once
// it is up again (ShardSet.onRestart) a node's near sources of its accounts are sent again
// (src/cluster/nearSources.ts). Both happen when announced, with no timer running: the timers are
// fake and never advanced (both once polled `restarts()` on a timer of their own).
// Accounts 'a…' run on shard 0, 'b…' on shard 1.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { NearSources } from '../../src/cluster/nearSources.js';
import type { Config } from '../../src/config.js';
import type { StreamOpenResult } from '../../src/runtime/hosts/streamCommands.js';
import { AccountStreams, type AccountStreamDeps } from '../../src/stream/accounts.js';
import type { Outbox } from '../../src/stream/outbox.js';
import type { Sock } from '../../src/stream/state.js';
import type { Topics } from '../../src/stream/topics.js';
import { FakeShards } from '../helpers/fakeShards.js';

const log = { warn: () => undefined, info: () => undefined, error: () => undefined, debug: () => undefined };

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('near sources after a shard restart', () => {
  it('sends the restarted shard\'s sources again at once, those of the other shard not', () => {
    const shards = new FakeShards();
    const servers: Record<string, string> = { a1: 'S1', b1: 'S2' };
    const near = new NearSources({ shards: shards as never, serverOf: (id) => servers[id], log: log as never });
    const relay = near.relayWith({ follow: () => undefined, unfollow: () => undefined, followMarket: async () => undefined, unfollowMarket: () => undefined } as never);
    near.added(['a1', 'b1']);
    void relay.followMarket('S1', 'EURUSD');
    void relay.followMarket('S2', 'BTCUSD');
    const sources = () => shards.calls.filter((c) => c.op === 'stream.source').map((c) => c.args);
    expect(sources()).toEqual([{ accountId: 'a1', server: 'S1', symbol: 'EURUSD' }, { accountId: 'b1', server: 'S2', symbol: 'BTCUSD' }]);

    shards.restart(1);
    expect(sources().slice(2)).toEqual([{ accountId: 'b1', server: 'S2', symbol: 'BTCUSD' }]);
    shards.restart(0);
    expect(sources().slice(3)).toEqual([{ accountId: 'a1', server: 'S1', symbol: 'EURUSD' }]);

    near.stop();
    shards.restart(0);
    expect(sources()).toHaveLength(4);
  });
});

describe('account streams after a shard death', () => {
  it('close the dead shard\'s sockets with RUNTIME_RESTARTED at once, with no new thread up, and keep the epoch for a resync', () => {
    const shards = new FakeShards();
    const ended: Array<[string, string]> = [];
    const out = { end: (s: Sock, why: string) => void ended.push([s.acc.id, why]) } as unknown as Outbox;
    const deps = {
      config: { streamHistoryMaxEvents: 100, streamHistoryMaxAgeMs: 60_000 } as Config, log, clock: { now: () => 1_700_000_000_000 },
      history: { load: () => undefined }, inflight: { draining: false }, shards,
    } as unknown as AccountStreamDeps;
    const streams = new AccountStreams(deps, { shardClock: { now: () => 1_700_000_000_000 } } as unknown as Topics, out);
    const open = { platform: 'P5', server: 'S1', phase: 'connected' } as StreamOpenResult;
    const a = streams.noteOpen('a1', open);
    const b = streams.noteOpen('b1', open);
    a.sockets.add({ acc: a } as Sock);
    b.sockets.add({ acc: b } as Sock);
    const [epochA, epochB] = [a.history.epoch, b.history.epoch];

    shards.die(0);
    expect(ended).toEqual([['a1', 'RUNTIME_RESTARTED']]);
    // The numbering is this thread's, stored before each frame is sent: the epoch goes on, and what
    // the dead thread had in flight is resynced with the broker (stream-shard-death-resume).
    expect(a.history.epoch).toBe(epochA);
    expect(a.needsResync).toBe(true);
    expect(a.opens).toBe(0); // the new thread holds no stream.open of ours
    expect(b.history.epoch).toBe(epochB);
    expect(b.opens).toBe(1);
    // Its new thread up: nothing more to do (a socket that came meanwhile opened its stream there).
    shards.restart(0);
    expect(ended).toHaveLength(1);
    expect(b.history.epoch).toBe(epochB);

    streams.stop();
    shards.die(1);
    expect(ended).toHaveLength(1);
  });
});
