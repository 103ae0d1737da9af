// One node: what AccountStreams does with an account's stream when the thread of its shard dies
// (ShardSet.onDeath; src/stream/accounts.ts goOn). The stream goes on in its epoch, marked for a resync
// with the broker; its sockets close 4011 and their opens, gone with the thread, release nothing; the
// opens still under way (sent again to the new thread) are counted, a socket's closed before the death
// included; with none, the stream is opened again on the new thread and held; if the new thread never
// answers, the state goes (the next socket picks it up from the store). Real SQLite history store.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import type { StreamOpenResult } from '../../src/runtime/hosts/streamCommands.js';
import { openDb } from '../../src/store/db.js';
import { StreamHistoryStore } from '../../src/store/streamHistory.js';
import { AccountStreams, type AccountStreamDeps } from '../../src/stream/accounts.js';
import { HistoryWrites } from '../../src/stream/historyWrites.js';
import type { Outbox } from '../../src/stream/outbox.js';
import type { Sock } from '../../src/stream/state.js';
import type { Topics } from '../../src/stream/topics.js';
import { tempDir, useCleanup } from '../helpers/tradingHost.js';

const cleanup = useCleanup();
const stops: Array<() => void> = [];
const NOW = 1_700_000_000_000;
const OPEN = { platform: 'P5', server: 's', phase: 'connected' } as StreamOpenResult;
const config = { streamHistoryMaxEvents: 10_000, streamHistoryMaxAgeMs: 120_000 } as Config;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});
afterEach(() => {
  for (const stop of stops.splice(0)) stop();
  vi.useRealTimers();
});

function boot() {
  const db = openDb(tempDir(cleanup, 'tagw-shard-death-'));
  cleanup.dbs.push(db);
  const calls: string[] = [];
  const log = createLogger('silent');
  const history = new StreamHistoryStore(db);
  const clock = { now: () => NOW };
  const shard = { die: (_shard: number): void => undefined, answers: true };
  const deps = {
    config, log, clock, history, inflight: { draining: false },
    shards: {
      shardFor: () => 0,
      onDeath: (l: (s: number) => void) => { shard.die = l; return () => undefined; },
      call: (_id: string, op: string) => {
        calls.push(op);
        if (op !== 'stream.open') return Promise.resolve({ ok: true });
        return shard.answers ? Promise.resolve(OPEN) : Promise.reject(new Error('no thread answered'));
      },
    },
  } as unknown as AccountStreamDeps;
  const ended: Array<{ sock: Sock; why: string }> = [];
  const out = { end: (sock: Sock, why: string) => ended.push({ sock, why }) } as unknown as Outbox;
  const streams = new AccountStreams(deps, { shardClock: { now: () => NOW }, noteServer: () => undefined } as unknown as Topics, out);
  stops.push(() => streams.stop());
  // As AccountEvents wires them: a new epoch is stored.
  const writes = new HistoryWrites({ log, clock, history }, {
    deliver: (acc, entries) => { if (entries.length > 0) acc.history.markSent(entries.at(-1)!.seq); },
    overflow: (acc) => streams.rotate(acc),
    kept: (acc) => streams.accounts.get(acc.id) === acc,
  });
  streams.onEpoch = (acc) => writes.epochBegun(acc);
  return { streams, calls, shard, ended };
}

const socket = (openState: Sock['openState']) => ({ openState, closed: false }) as Sock;
const answers = () => new Promise((r) => setImmediate(r));

describe('AccountStreams: the death of an account\'s shard thread, one node', () => {
  it('the stream goes on in its epoch, resync marked; its sockets close 4011 and release nothing; with no open left it is opened again on the new thread and held', async () => {
    const g = boot();
    const acc = g.streams.noteOpen('a', OPEN);
    acc.history.append('TRADE', '{}', NOW);
    const { epoch, seq } = acc.history;
    const live = socket('open');
    acc.sockets.add(live);
    g.calls.length = 0;
    g.shard.die(0);
    expect(g.ended).toEqual([{ sock: live, why: 'RUNTIME_RESTARTED' }]);
    expect(live.openState).toBe('failed'); // its close sends no stream.close (the new thread holds none of it)
    expect(g.streams.accounts.get('a')).toBe(acc);
    expect({ epoch: acc.history.epoch, seq: acc.history.seq }).toEqual({ epoch, seq });
    expect(acc.needsResync).toBe(true);
    expect(acc.heldDeals).toEqual([]);
    acc.sockets.delete(live); // the hub's close
    await answers();
    expect(g.calls).toEqual(['stream.open']);
    expect(acc.opens).toBe(1);
    expect(acc.retainTimer).not.toBeNull(); // held as after its last socket
  });

  it('an open under way at the death is sent again to the new thread and counted (its socket closed before the death too): nothing opened twice', async () => {
    const g = boot();
    const acc = g.streams.noteOpen('a', OPEN);
    // A synchronous upgrade's open under way (admission.ts), its socket gone already.
    acc.opens++;
    acc.openCalls++;
    g.calls.length = 0;
    g.shard.die(0);
    expect(acc.opens).toBe(1);
    await answers();
    expect(g.calls).toEqual([]);
    expect(g.streams.accounts.get('a')).toBe(acc);
  });

  it('a new thread that never answers: the state goes, and the next socket picks the stream up from the store, same epoch, resync marked', async () => {
    const g = boot();
    const acc = g.streams.noteOpen('a', OPEN);
    g.streams.touch(); // the alive mark
    const { epoch } = acc.history;
    g.shard.answers = false;
    g.shard.die(0);
    await answers();
    expect(g.streams.accounts.has('a')).toBe(false);
    const again = g.streams.noteOpen('a', OPEN);
    expect(again.history.epoch).toBe(epoch);
    expect(again.needsResync).toBe(true);
  });
});
