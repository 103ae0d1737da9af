// StreamFollower (src/cluster/streamFollow.ts): a node's relay subscriptions follow the stream
// commands its hub sends to an account's owner. The end-to-end behaviour (a socket on a node that
// does not own the account gets the owner's frames) is cluster-scenarios-stream.test.ts.
import { describe, expect, it } from 'vitest';
import { StreamFollower } from '../../src/cluster/streamFollow.js';
import type { ArgsOf, CommandName, ResultOf } from '../../src/runtime/protocol.js';

function setup() {
  const calls: string[] = [];
  const relay = {
    follow: async (k: string) => void calls.push(`follow ${k}`),
    unfollow: (k: string) => void calls.push(`unfollow ${k}`),
    followMarket: async (s: string, sym: string) => void calls.push(`followMarket ${s} ${sym}`),
    unfollowMarket: (s: string, sym: string) => void calls.push(`unfollowMarket ${s} ${sym}`),
  };
  const f = new StreamFollower(relay);
  const run = <C extends CommandName>(op: C, args: Partial<ArgsOf<C>>, reply: () => Promise<unknown> = async () => ({ ok: true })) =>
    f.call('acc', op, { accountId: 'acc', ...args } as ArgsOf<C>, async () => {
      calls.push(`send ${op}`);
      return (await reply()) as ResultOf<C>;
    });
  const open = () => run('stream.open', {}, async () => ({ server: 'Srv', platform: 'P5' }));
  return { calls, run, open, follower: f };
}

describe('StreamFollower', () => {
  it('follows the account before the open reaches the owner, a symbol once on the account\'s server, and drops all at the close', async () => {
    const { calls, run, open } = setup();
    await open();
    await run('stream.sub', { symbol: 'BTCUSD', timeframes: [] });
    await run('stream.sub', { symbol: 'BTCUSD', timeframes: ['M1'] });
    await run('stream.sub', { symbol: 'EURUSD', timeframes: [] });
    await run('stream.unsub', { symbol: 'BTCUSD', timeframes: ['M1'] }); // timeframes only: quotes still wanted
    await run('stream.unsub', { symbol: 'EURUSD' });
    await run('stream.close', {});
    expect(calls).toStrictEqual([
      'follow acc', 'send stream.open',
      'followMarket Srv BTCUSD', 'send stream.sub', 'send stream.sub',
      'followMarket Srv EURUSD', 'send stream.sub',
      'send stream.unsub', 'send stream.unsub', 'unfollowMarket Srv EURUSD',
      'send stream.close', 'unfollowMarket Srv BTCUSD', 'unfollow acc',
    ]);
  });

  it('a failed open or sub leaves nothing followed; a failed close still drops everything; other commands pass through', async () => {
    const { calls, run, open } = setup();
    const fail = async () => { throw new Error('owner gone'); };
    await expect(run('stream.open', {}, fail)).rejects.toThrow('owner gone');
    expect(calls.splice(0)).toStrictEqual(['follow acc', 'send stream.open', 'unfollow acc']);
    await open();
    await expect(run('stream.sub', { symbol: 'X', timeframes: [] }, fail)).rejects.toThrow('owner gone');
    await expect(run('stream.close', {}, fail)).rejects.toThrow('owner gone');
    await run('stream.snapshot', {});
    expect(calls).toStrictEqual([
      'follow acc', 'send stream.open', 'followMarket Srv X', 'send stream.sub', 'unfollowMarket Srv X',
      'send stream.close', 'unfollow acc', 'send stream.snapshot',
    ]);
  });

  it('counts opens as the owner\'s shard does: a close while another open (a second socket, a stream held for resume) remains keeps every subscription', async () => {
    const { calls, run, open } = setup();
    await open();
    await run('stream.sub', { symbol: 'BTCUSD', timeframes: [] });
    await open(); // a second socket
    await run('stream.sub', { symbol: 'BTCUSD', timeframes: [] });
    await run('stream.close', {}); // the held stream released as the new socket arrives
    expect(calls.splice(0)).toStrictEqual([
      'follow acc', 'send stream.open', 'followMarket Srv BTCUSD', 'send stream.sub', 'send stream.open', 'send stream.sub', 'send stream.close',
    ]);
    await run('stream.close', {});
    expect(calls).toStrictEqual(['send stream.close', 'unfollowMarket Srv BTCUSD', 'unfollow acc']);
  });

  it('forget (the hub let go of its opens at a shard\'s death): every open and symbol goes at once; a later open follows again and its close drops it', async () => {
    const { calls, run, open, follower } = setup();
    await open();
    await open(); // a second socket
    await run('stream.sub', { symbol: 'BTCUSD', timeframes: [] });
    calls.length = 0;
    follower.forget('acc');
    follower.forget('acc'); // nothing left: nothing more
    expect(calls.splice(0)).toStrictEqual(['unfollowMarket Srv BTCUSD', 'unfollow acc']);
    await open();
    await run('stream.close', {});
    expect(calls).toStrictEqual(['follow acc', 'send stream.open', 'send stream.close', 'unfollow acc']);
  });
});
