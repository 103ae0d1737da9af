// NearSources' quiet notices (src/cluster/nearSources.ts): the node tells the owners a served
// symbol is quiet (its relayed ticks not needed) once local delivery caught up, again every refresh
// while it is, and that it is not as soon as local delivery fell behind the owner's pulses, its
// account left with none to take over, the symbol is let go, or the source's shard died or restarted.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { NearSources } from '../../src/cluster/nearSources.js';
import type { QuietNotice } from '../../src/cluster/quietNodes.js';
import { FakeShards } from '../helpers/fakeShards.js';

const log = { warn: () => undefined, info: () => undefined, error: () => undefined, debug: () => undefined };

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

function setup() {
  const shards = new FakeShards();
  const notices: QuietNotice[] = [];
  const near = new NearSources({
    shards: shards as never, serverOf: () => 'S', log: log as never,
    quiet: { nodeId: 'B', announce: (n) => void notices.push(n), refreshMs: 1_000 },
  });
  const relay = near.relayWith({ follow: () => undefined, unfollow: () => undefined, followMarket: async () => undefined, unfollowMarket: () => undefined } as never);
  const said = () => notices.map((n) => n.pairs.map(([s, y]) => `${s}/${y}`).join(','));
  return { shards, notices, near, relay, said };
}

describe('quiet notices', () => {
  it('quiet once local delivery caught up, told again each refresh; behind the pulses by more than the grace: not quiet, told once', () => {
    const { near, relay, notices, said } = setup();
    near.added(['a1']);
    void relay.followMarket('S', 'X');
    expect(notices).toEqual([]); // served, nothing delivered yet
    near.watch.known('S', 'X', 1_000); // a relayed tick
    near.watch.local('S', 'X', 1_000);
    expect(notices).toEqual([{ node: 'B', pairs: [['S', 'X']], ttlMs: 3_000 }]);
    near.watch.local('S', 'X', 1_200); // already quiet: nothing new to say
    expect(notices).toHaveLength(1);
    vi.advanceTimersByTime(2_000);
    expect(said()).toEqual(['S/X', 'S/X', 'S/X']);
    near.watch.known('S', 'X', 2_201); // a pulse more than a second past the last local tick
    expect(said()).toEqual(['S/X', 'S/X', 'S/X', '']);
    expect(near.counts()).toMatchObject({ quiet: 0, stalls: 1 });
    vi.advanceTimersByTime(3_000);
    expect(notices).toHaveLength(4); // an empty set is said once
    near.watch.local('S', 'X', 2_201);
    expect(said().at(-1)).toBe('S/X');
    near.stop();
  });

  it('not quiet at once when the serving account leaves with none to take over, when the symbol is let go, or when the source\'s shard died or restarted', async () => {
    const { shards, near, relay, said } = setup();
    near.added(['a1']);
    void relay.followMarket('S', 'X');
    near.watch.local('S', 'X', 1);
    expect(said()).toEqual(['S/X']);
    near.removed(['a1']);
    expect(said()).toEqual(['S/X', '']);

    near.added(['b1']); // takes the symbol: quiet once it delivers
    near.watch.local('S', 'X', 2);
    expect(said().at(-1)).toBe('S/X');
    shards.die(0); // not the source's shard
    expect(said().at(-1)).toBe('S/X');
    shards.die(1); // the source's shard died: it delivers nothing now
    expect(said().at(-1)).toBe('');
    shards.restart(1); // its new thread holds no source: sent again, not quiet until it delivers
    expect(said().at(-1)).toBe('');
    near.watch.local('S', 'X', 3);
    expect(said().at(-1)).toBe('S/X');
    shards.restart(1); // restarted again (no death seen, say): not quiet until the new thread delivers
    expect(said().at(-1)).toBe('');
    near.watch.local('S', 'X', 3);
    expect(said().at(-1)).toBe('S/X');
    relay.unfollowMarket('S', 'X');
    expect(said().at(-1)).toBe('');
    expect(near.counts()).toMatchObject({ wanted: 0, served: 0, quiet: 0 });
    near.watch.local('S', 'X', 4); // no longer watched
    expect(said().at(-1)).toBe('');
    near.stop();
  });
});
