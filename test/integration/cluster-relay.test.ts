// The stream relay over a real nats-server: node A owns accounts and publishes its shards' events,
// node B receives only what it follows, once each, into the same onEvent path as its own shards'.
import { readSync } from 'node:fs';
import type { Socket } from 'node:net';
import uWS from 'uWebSockets.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { ShardEvent } from '../../src/runtime/protocol.js';
import type { LocalShards } from '../../src/cluster/router.js';
import { StreamRelay } from '../../src/cluster/streamRelay.js';
import { createLogger } from '../../src/log.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { MemoryLeases, startNode, type TestNode } from '../helpers/cluster.js';
import { until } from '../helpers/until.js';

const noShards: LocalShards = { call: () => Promise.reject(new Error('no shards here')) };
let nats: Engine;
let A: TestNode, B: TestNode;
let seq = 0;

const positions = (accountId: string): ShardEvent => ({ kind: 'stream.positions', key: accountId, data: { src: 1, v: ++seq, positions: [] } });
const tick = (server: string, symbol: string, timeMsc: number, bid = 1.1, source = 's0'): ShardEvent =>
  ({ kind: 'stream.tick', key: server, data: { server, tick: { symbol, bid, ask: bid + 0.0002, timeMsc }, source } });
/** A tick as another node receives it: A's relay names A as its source. */
const fromA = (ev: ShardEvent): ShardEvent => (ev.kind === 'stream.tick' ? { ...ev, data: { ...ev.data, source: 'n:A', relayed: true } } : ev);
/** Publishes a marker on a followed account and waits for it: what A published before it has arrived (NATS keeps a publisher's order). */
async function barrier(marker = 'marker'): Promise<void> {
  const p = positions(marker);
  A.relay.publish(p);
  const v = (p.data as { v: number }).v;
  await until(() => B.events.some((e) => e.key === marker && (e.data as { v: number }).v === v), 'the marker to arrive');
}

beforeAll(async () => {
  nats = await startNats();
  const leases = new MemoryLeases();
  [A, B] = await Promise.all([startNode('A', nats.url, noShards, leases), startNode('B', nats.url, noShards, leases)]);
  await B.relay.follow('marker');
});
afterAll(async () => {
  await Promise.all([A, B].map((x) => x?.close()));
  await nats?.stop();
});
beforeEach(() => {
  A.events.length = 0;
  B.events.length = 0;
});

describe('StreamRelay', () => {
  it('delivers the events of a followed account, once each, and nothing of the others', async () => {
    const id = 'acc.1 *>'; // one subject token whatever it holds
    await B.relay.follow(id);
    const mine = [positions(id), { kind: 'stream.deal', key: id, data: { deal: { ticket: 1 } } } as unknown as ShardEvent];
    for (const ev of mine) A.relay.publish(ev);
    A.relay.publish(positions('acc.2'));
    A.relay.publish(positions('acc'));
    await barrier();
    expect(B.events.filter((e) => e.key !== 'marker')).toStrictEqual(mine);
    B.relay.unfollow(id);
  });

  it('interest is reference-counted: one subscription, until the last unfollow', async () => {
    const id = 'acc-ref';
    await B.relay.follow(id);
    await B.relay.follow(id);
    expect(B.relay.following().get('tagw.acct.acc-ref.>')).toBe(2);
    A.relay.publish(positions(id));
    await barrier();
    expect(B.events.filter((e) => e.key === id)).toHaveLength(1);
    B.relay.unfollow(id);
    A.relay.publish(positions(id));
    await barrier();
    expect(B.events.filter((e) => e.key === id)).toHaveLength(2);
    B.relay.unfollow(id);
    expect(B.relay.following().has('tagw.acct.acc-ref.>')).toBe(false);
    A.relay.publish(positions(id));
    await barrier();
    expect(B.events.filter((e) => e.key === id)).toHaveLength(2);
  });

  it('publishes market data once per server and symbol, however many local accounts forward it', async () => {
    const server = 'Broker.Live 2';
    await B.relay.followMarket(server, 'EURUSD');
    const before = A.relay.stats.duplicates;
    // Two shards (two accounts on the same server) forward the same ticks; one is older than the last.
    for (const [t, shard] of [[1000, 's0'], [1000, 's1'], [1001, 's0'], [1001, 's1'], [999, 's1']] as const) A.relay.publish(tick(server, 'EURUSD', t, 1.1, shard));
    A.relay.publish(tick(server, 'GBPUSD', 1002)); // not followed
    A.relay.publish(tick('Other', 'EURUSD', 1003)); // another server: not followed
    await barrier();
    const got = B.events.filter((e) => e.kind === 'stream.tick');
    expect(got.map((e) => [e.key, (e.data as { tick: { symbol: string; timeMsc: number } }).tick.timeMsc])).toEqual([[server, 1000], [server, 1001]]);
    expect(A.relay.stats.duplicates - before).toBe(3);
    B.relay.unfollowMarket(server, 'EURUSD');
  });

  it('writes a turn\'s first market event to nats-server at once, the turn\'s later ones in nats.js\'s one write at its end', async () => {
    const server = 'Write-Now';
    await B.relay.followMarket(server, 'EURUSD');
    // nats.js's queue of what publish took and the socket has not: empty once written.
    const queued = () => (A.link.nc as unknown as { protocol: { outbound: { length(): number } } }).protocol.outbound.length();
    await A.link.nc.flush();
    A.relay.publish(tick(server, 'EURUSD', 2000));
    expect(queued()).toBe(0);
    A.relay.publish(tick(server, 'EURUSD', 2001));
    A.relay.publish(tick(server, 'EURUSD', 2002));
    expect(queued()).toBeGreaterThan(0);
    await barrier();
    expect(queued()).toBe(0);
    // The next turn's first one leaves at once again; account events keep nats.js's own write.
    A.relay.publish(positions('acc-queued'));
    expect(queued()).toBeGreaterThan(0);
    await A.link.nc.flush();
    A.relay.publish(tick(server, 'EURUSD', 2003));
    expect(queued()).toBe(0);
    await barrier();
    const got = B.events.filter((e) => e.kind === 'stream.tick' && e.key === server);
    expect(got.map((e) => (e.data as { tick: { timeMsc: number } }).tick.timeMsc)).toEqual([2000, 2001, 2002, 2003]);
    B.relay.unfollowMarket(server, 'EURUSD');
  });

  it('publishes market data for local sockets once uWS has written their frames, in order with the market data after it; account events are not held back', async () => {
    const server = 'After-Local';
    await B.relay.followMarket(server, 'EURUSD');
    await B.relay.follow('acc-after');
    // A uWS app with one subscribed socket, as the owner's hub; the client's bytes are read by hand
    // off its paused socket: in its kernel buffer as soon as uWS wrote them.
    const app = uWS.App().ws('/*', { open: (ws) => void ws.subscribe('q') });
    const listen = await new Promise<uWS.us_listen_socket>((resolve) => app.listen('127.0.0.1', 0, (s) => resolve(s)));
    const client = new WebSocket(`ws://127.0.0.1:${uWS.us_socket_local_port(listen)}/`);
    await new Promise((resolve) => client.once('open', resolve));
    const socket = (client as unknown as { _socket: Socket & { _handle: { fd: number } } })._socket;
    socket.pause();
    const written = () => {
      try {
        return readSync(socket._handle.fd, Buffer.alloc(256));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return 0;
        throw err;
      }
    };
    const nc = A.link.nc;
    const publish = nc.publish.bind(nc);
    let frameWhenRelayed = -1;
    nc.publish = (subject, ...rest) => {
      if (subject.startsWith('tagw.md.') && frameWhenRelayed < 0) frameWhenRelayed = written();
      publish(subject, ...rest);
    };
    try {
      await nc.flush();
      const before = A.relay.stats.published;
      app.publish('q', 'frame');
      A.relay.publishAfterLocalWrites(tick(server, 'EURUSD', 4000));
      A.relay.publish(tick(server, 'EURUSD', 4001));
      A.relay.publish(positions('acc-after'));
      expect(A.relay.stats.published).toBe(before + 1);
      expect(written()).toBe(0);
      await new Promise((resolve) => setImmediate(resolve));
      expect(frameWhenRelayed).toBeGreaterThan(0);
      expect(A.relay.stats.published).toBe(before + 3);
      await barrier();
      expect(B.events.filter((e) => e.key === server).map((e) => (e.data as { tick: { timeMsc: number } }).tick.timeMsc)).toEqual([4000, 4001]);
      expect(B.events.filter((e) => e.key === 'acc-after')).toHaveLength(1);
    } finally {
      nc.publish = publish;
      client.terminate();
      uWS.us_listen_socket_close(listen);
      B.relay.unfollowMarket(server, 'EURUSD');
      B.relay.unfollow('acc-after');
    }
  });

  it('keeps ticks and candles of one symbol apart: each on its own subject, neither a duplicate of the other', async () => {
    const server = 'Kinds';
    await B.relay.followMarket(server, 'EURUSD');
    const candle = (time: number, timeframe: string) => ({ kind: 'stream.candle', key: server, data: { server, candle: { symbol: 'EURUSD', timeframe, closed: false, candle: { time, open: 1, high: 1, low: 1, close: 1, ticks: 1 } } } }) as unknown as ShardEvent;
    const sent = [tick(server, 'EURUSD', 3000), candle(3000, 'M1'), candle(3000, 'H1'), tick(server, 'EURUSD', 3001), candle(3000, 'M1')];
    for (const ev of sent) A.relay.publish(ev);
    // A symbol whose name looks like another's candle key is its own subject, not followed here.
    A.relay.publish(tick(server, 'EURUSD\u0000M1', 3002));
    await barrier();
    const got = B.events.filter((e) => e.key === server);
    expect(got).toStrictEqual(sent.slice(0, 4).map(fromA));
    B.relay.unfollowMarket(server, 'EURUSD');
  });

  it('merges its shards\' copies by source: ticks of one millisecond once each and in order (A, B, A again), named as this node\'s', async () => {
    const server = 'Same-Ms';
    await B.relay.followMarket(server, 'EURUSD');
    // Shard s0 delivers A B A within one millisecond, s1 its copies later; then the next millisecond.
    const copies: Array<[number, number, string]> = [[4000, 1.1, 's0'], [4000, 1.2, 's0'], [4000, 1.1, 's1'], [4000, 1.2, 's1'], [4000, 1.1, 's0'], [4000, 1.1, 's1'], [4001, 1.3, 's1'], [4001, 1.3, 's0']];
    for (const [t, bid, shard] of copies) A.relay.publish(tick(server, 'EURUSD', t, bid, shard));
    await barrier();
    const got = B.events.filter((e) => e.key === server);
    expect(got).toStrictEqual([tick(server, 'EURUSD', 4000, 1.1), tick(server, 'EURUSD', 4000, 1.2), tick(server, 'EURUSD', 4000, 1.1), tick(server, 'EURUSD', 4001, 1.3)].map(fromA));
    B.relay.unfollowMarket(server, 'EURUSD');
  });

  it('withholds the ticks every node wanting them is quiet for, publishing the latest one\'s time as a pulse instead; candles still go; the watches hear each side\'s ticks', async () => {
    const server = 'Quiet';
    let quiet = false;
    const owner = new StreamRelay({ link: A.link, nodeId: 'A', log: createLogger('silent'), onEvent: () => {}, wanted: () => true, quietFor: () => quiet, pulseMs: 40 });
    const heard = { local: [] as number[], known: [] as number[] };
    owner.watch = { local: (_s, _y, t) => heard.local.push(t), known: () => {} };
    B.relay.watch = { local: () => {}, known: (sv, y, t) => (sv === server && y === 'EURUSD' ? heard.known.push(t) : undefined) };
    try {
      await B.relay.followMarket(server, 'EURUSD');
      owner.publish(tick(server, 'EURUSD', 5000));
      quiet = true;
      owner.publish(tick(server, 'EURUSD', 5001));
      owner.publish(tick(server, 'EURUSD', 5003, 1.2, 's1'));
      owner.publish(tick(server, 'EURUSD', 5002));
      const candle = { kind: 'stream.candle', key: server, data: { server, candle: { symbol: 'EURUSD', timeframe: 'M1', candle: { time: 5000, open: 1, high: 1, low: 1, close: 1, tickVolume: 1 }, closed: false } } } as unknown as ShardEvent;
      owner.publish(candle);
      expect(owner.stats.withheld).toBe(3);
      // One pulse for the three withheld: the latest time.
      await until(() => heard.known.includes(5003), 'the pulse');
      quiet = false;
      owner.publish(tick(server, 'EURUSD', 5004));
      await until(() => heard.known.includes(5004), 'the tick after the quiet');
      await barrier();
      expect(B.events.filter((e) => e.key === server).map((e) => e.kind === 'stream.tick' ? (e.data as { tick: { timeMsc: number } }).tick.timeMsc : 'candle')).toEqual([5000, 'candle', 5004]);
      expect(heard.known).toEqual([5000, 5003, 5004]);
      expect(heard.local).toEqual([5000, 5001, 5003, 5002, 5004]);
      expect(owner.stats.pulses).toBe(1);
      expect(B.relay.stats.pulsesIn).toBeGreaterThanOrEqual(1);
    } finally {
      owner.close();
      B.relay.watch = undefined;
      B.relay.unfollowMarket(server, 'EURUSD');
    }
  });

  it('a node never receives its own events back (its sockets had them from its shards)', async () => {
    await A.relay.follow('acc-own');
    await B.relay.follow('acc-own');
    A.relay.publish(positions('acc-own'));
    await barrier();
    expect(B.events.filter((e) => e.key === 'acc-own')).toHaveLength(1);
    expect(A.events).toHaveLength(0);
    A.relay.unfollow('acc-own');
    B.relay.unfollow('acc-own');
  });

  it('an account this node holds the lease of: its events from another node\'s shards are not delivered (that node runs it no more)', async () => {
    // npm run chaos (seed 853588668): an owner frozen by SIGSTOP past its lease resumed with its
    // broker connection still open, and its shard passed on the deals that connection had buffered;
    // the relay gave them to the account's new owner, which numbered one its history had already
    // carried (a ledger built from the stored deal mark alone): the same TRADE twice on a client.
    const held = 'acc-held';
    const C = await startNode('C', nats.url, noShards, new MemoryLeases(), { holds: (id) => id === held });
    try {
      await Promise.all([C.relay.follow(held), C.relay.follow('acc-free'), C.relay.follow('marker')]);
      const deal = { kind: 'stream.deal', key: held, data: { deal: { ticket: 101383, timeMsc: 1 } } } as unknown as ShardEvent;
      const phase = { kind: 'stream.phase', key: held, data: { phase: 'connected' } } as unknown as ShardEvent;
      const free = positions('acc-free');
      for (const ev of [deal, positions(held), phase, free]) A.relay.publish(ev);
      const marker = positions('marker');
      A.relay.publish(marker);
      await until(() => C.events.some((e) => e.key === 'marker' && (e.data as { v: number }).v === (marker.data as { v: number }).v), 'the marker to arrive');
      expect(C.events.filter((e) => e.key !== 'marker')).toStrictEqual([free]);
      expect(C.relay.stats.stale).toBe(3);
    } finally {
      await C.close();
    }
  });

  it('an event NATS refuses (past the message size) is counted as dropped, never thrown into the shard-event path', () => {
    const before = A.relay.stats.dropped;
    const huge = { kind: 'stream.positions', key: 'acc-huge', data: { v: 1, positions: Array.from({ length: 20_000 }, (_, i) => ({ ticket: i, comment: 'x'.repeat(100) })) } } as unknown as ShardEvent;
    expect(() => A.relay.publish(huge)).not.toThrow();
    expect(A.relay.stats.dropped).toBe(before + 1);
  });

  it('node-local kinds (thread stats, a shard waiting for disk space, operator phases) are not relayed', async () => {
    const before = A.relay.stats.published;
    A.relay.publish({ kind: 'storage.waiting', key: '0', data: { waiting: true, what: 'seat state', err: 'database or disk is full' } });
    A.relay.publish({ kind: 'thread.stats', key: '0', data: { lagP99: 0, lagMax: 0, gcSeconds: 0, gcCount: 0, heapUsedBytes: 0, heapTotalBytes: 0 } });
    A.relay.publish({ kind: 'acct.phase', key: 'x', data: 'connected' } as ShardEvent);
    expect(A.relay.stats.published).toBe(before);
  });

  it('after a NATS restart the interest is back by itself and events flow again, without duplicates', async () => {
    const id = 'acc-restart';
    await B.relay.follow(id);
    await nats.restart();
    await until(() => A.link.up && B.link.up, 'both nodes back on NATS');
    await B.link.nc.flush();
    const ev = positions(id);
    A.relay.publish(ev);
    await barrier();
    expect(B.events.filter((e) => e.key === id)).toStrictEqual([ev]);
    B.relay.unfollow(id);
  });
});
