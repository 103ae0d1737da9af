// A node's sockets' streams at an owner that released them while the node still lived: the owner
// judged it departed (frozen past its lease: SIGSTOP, a VM pause) and forgot what it held
// (OwnerStreams.forgetNode), the node woke up with its sockets open. Chaos seed 512757386 (schedule
// 8): c1-a frozen 2993 ms with nats-server restarted meanwhile; its ask to be forgotten (rejoin) was
// lost, so nothing was opened again; a later socket's stream.open, then the hub's close of its
// retention hold (an open the owner had already released) closed the owner's stream under the new
// socket, whose subscribe and snapshot got NOT_FOUND "no open stream for this account", and the
// socket stayed open and silent. Real nats-server and routers; the owner's shard is a model of the
// stream host's count of opens (runtime/hosts/streams.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiError } from '../../src/errors.js';
import type { LocalShards } from '../../src/cluster/router.js';
import { NO_OPEN_STREAM } from '../../src/runtime/hosts/streamCommands.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { MemoryLeases, startNode, type TestNode } from '../helpers/cluster.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

/** The stream host's state per account, as the owner's shard keeps it: opens minus closes (its
 *  state goes with the last), the symbols wanted; a sub or snapshot without state is NOT_FOUND. */
function streamShards() {
  const streams = new Map<string, { sockets: number; symbols: Set<string> }>();
  /** Ops answered 503 once each (the shard or the owner lookup behind it failing for a moment). */
  const failOnce = new Set<string>();
  const shards: LocalShards = {
    async call(key, op, args) {
      if (failOnce.delete(op)) throw apiError('SERVICE_UNAVAILABLE', 'not now; retry');
      const a = args as { symbol?: string };
      const s = streams.get(key);
      switch (op) {
        case 'stream.open':
          if (s) s.sockets++;
          else streams.set(key, { sockets: 1, symbols: new Set() });
          return { platform: 'P5', server: 'Sim', serverInfo: null, phase: 'connected' } as never;
        case 'stream.close':
          if (s && --s.sockets <= 0) streams.delete(key);
          return { ok: true } as never;
        case 'stream.sub':
          if (!s) throw apiError('NOT_FOUND', NO_OPEN_STREAM);
          s.symbols.add(a.symbol!);
          return { lastTick: null, server: 'Sim' } as never;
        case 'stream.unsub':
          s?.symbols.delete(a.symbol!);
          return { ok: true } as never;
        case 'stream.snapshot':
          if (!s) throw apiError('NOT_FOUND', NO_OPEN_STREAM);
          return { server: 'Sim', posV: 0, ordV: 0, positions: [], orders: [] } as never;
        default:
          return {} as never;
      }
    },
  };
  const held = (key: string) => {
    const s = streams.get(key);
    return s ? { sockets: s.sockets, symbols: [...s.symbols].sort() } : undefined;
  };
  return { shards, streams, held, failOnce };
}

let nats: Engine;
/** Node A's connection to nats-server: its messages can be dropped (a request lost in a restart). */
let proxy: TcpProxy;
let leases: MemoryLeases;
const shards = { A: streamShards(), B: streamShards(), C: streamShards() };
let A: TestNode, B: TestNode, C: TestNode;
let n = 0;
const acct = () => `forgotten.${++n}`;
const sub = (node: TestNode, id: string, symbol: string) => node.router.call(id, 'stream.sub', { accountId: id, symbol, timeframes: [], timeoutMs: 1_000 });

beforeAll(async () => {
  nats = await startNats();
  proxy = await startTcpProxy(Number(new URL(nats.url).port));
  leases = new MemoryLeases();
  A = await startNode('A', `nats://127.0.0.1:${proxy.port}`, shards.A.shards, leases, { ownerWaitMs: 800 });
  [B, C] = await Promise.all((['B', 'C'] as const).map((id) => startNode(id, nats.url, shards[id].shards, leases, { ownerWaitMs: 800 })));
  watchA();
});
afterAll(async () => {
  await Promise.all([A, B, C].map((x) => x?.close()));
  await proxy?.close();
  await nats?.stop();
});

/** What reaches A from nats-server and what A sends: while `asleep`, B's notice that it released
 *  A's holds is lost (A frozen: it never reads it); `dropForget` asks to be forgotten are lost. */
const wire = { asleep: false, dropForget: 0, dropped: 0 };
function watchA(): void {
  proxy.watch((dir, chunk) => {
    const text = chunk.toString('latin1');
    if (dir === 'down' && wire.asleep && text.includes('tagw.node.A.released')) return 'drop';
    if (dir === 'up' && wire.dropForget > 0 && text.includes('tagw.node.B.forget')) {
      wire.dropForget--;
      wire.dropped++;
      return 'drop';
    }
    return undefined;
  });
}

/** B judges A departed while A is frozen: B releases A's holds, and its notice to A is lost. */
async function releasedWhileAsleep(): Promise<void> {
  wire.asleep = true;
  await B.router.streams.forgetNode('A');
  // B's notice reached nats-server, then went to A before the answer to A's ping: dropped.
  await B.link.nc.flush();
  await A.link.nc.flush();
  wire.asleep = false;
}

/** An account owned by B, which A and C know. */
async function ownedByB(): Promise<string> {
  const id = acct();
  leases.set(id, 'B', B.owners);
  await until(async () => (await A.owners.ownerOf(id)) === 'B' && (await C.owners.ownerOf(id)) === 'B', 'A and C learn the owner');
  return id;
}

/** An account owned by C, A's sockets holding its stream (subscribed to BTCUSD) there. */
async function heldByAAtC(): Promise<string> {
  const id = acct();
  leases.set(id, 'C', C.owners);
  await until(async () => (await A.owners.ownerOf(id)) === 'C', 'A learns the owner');
  await A.router.call(id, 'stream.open', { accountId: id });
  await sub(A, id, 'BTCUSD');
  return id;
}

/** A's sockets' stream comes to be open and subscribed at B, exactly once; A's close lets it go there. */
async function reopenedAtB(id: string, what: string, check: () => void = () => {}): Promise<void> {
  await until(() => shards.B.held(id)?.symbols.includes('BTCUSD') === true, what);
  check();
  expect(shards.B.held(id)).toEqual({ sockets: 1, symbols: ['BTCUSD'] });
  await A.router.call(id, 'stream.close', { accountId: id });
  expect(shards.B.held(id)).toBeUndefined();
}

describe('a node the owner released while it lived (judged departed while frozen)', () => {
  it('the hub\'s close of an open the owner had released does not close the stream under a newer socket: its subscribe and snapshot are answered, and the owner holds exactly the node\'s sockets', async () => {
    const id = await ownedByB();
    // A's socket: open and subscribed. It closes while A runs on; the hub keeps its open (the
    // retention hold: a reconnect within the history's age resumes without a gap).
    await A.router.call(id, 'stream.open', { accountId: id });
    await sub(A, id, 'BTCUSD');
    // A frozen past its lease: B's node list no longer shows it, B releases what it held.
    await releasedWhileAsleep();
    expect(shards.B.held(id)).toBeUndefined();
    // A back (its rejoin not run yet, or its ask lost): the client reconnects to A. The new socket's
    // open; its answer lets the retention hold go (the hub's close of the open B released); then the
    // socket subscribes and asks its snapshot.
    await A.router.call(id, 'stream.open', { accountId: id });
    await A.router.call(id, 'stream.close', { accountId: id });
    await sub(A, id, 'BTCUSD');
    await A.router.call(id, 'stream.snapshot', { accountId: id, timeoutMs: 1_000 });
    expect(shards.B.held(id)).toEqual({ sockets: 1, symbols: ['BTCUSD'] });
    // The socket closes: nothing left open at B (no open held twice).
    await A.router.call(id, 'stream.close', { accountId: id });
    expect(shards.B.held(id)).toBeUndefined();
  });

  it('its stale close takes nothing of another node\'s sockets', async () => {
    const id = await ownedByB();
    await C.router.call(id, 'stream.open', { accountId: id });
    await sub(C, id, 'EURUSD');
    await A.router.call(id, 'stream.open', { accountId: id });
    await sub(A, id, 'BTCUSD');
    await releasedWhileAsleep();
    expect(shards.B.held(id)).toEqual({ sockets: 1, symbols: ['EURUSD'] });
    await A.router.call(id, 'stream.open', { accountId: id });
    await A.router.call(id, 'stream.close', { accountId: id });
    await sub(A, id, 'BTCUSD');
    expect(shards.B.held(id)).toEqual({ sockets: 2, symbols: ['BTCUSD', 'EURUSD'] });
    // C's socket closes: A's is still held at B.
    await C.router.call(id, 'stream.close', { accountId: id });
    expect(shards.B.held(id)).toEqual({ sockets: 1, symbols: ['BTCUSD'] });
    await A.router.call(id, 'stream.close', { accountId: id });
    expect(shards.B.held(id)).toBeUndefined();
  });

  it('back from the lapse, its ask to be forgotten lost (its NATS connection had died meanwhile): it asks again, and opens again at the owner what its sockets hold', async () => {
    const id = await ownedByB();
    await A.router.call(id, 'stream.open', { accountId: id });
    await sub(A, id, 'BTCUSD');
    await releasedWhileAsleep();
    expect(shards.B.held(id)).toBeUndefined();
    wire.dropForget = 1;
    wire.dropped = 0;
    void A.router.rejoin();
    await reopenedAtB(id, 'A\'s sockets\' stream open and subscribed at B again', () => expect(wire.dropped).toBe(1));
  });

  it('an owner that releases a node that lives on (its reading of the node list stale) tells it: the node asks to be forgotten and opens again what its sockets hold', async () => {
    const id = await ownedByB();
    await A.router.call(id, 'stream.open', { accountId: id });
    await sub(A, id, 'BTCUSD');
    await B.router.streams.forgetNode('A');
    await reopenedAtB(id, 'A\'s sockets\' stream open and subscribed at B again');
  });

  it('an account moving to an owner that released the node meanwhile: the node\'s reopen there, refused, asks to be forgotten and opens it again', async () => {
    const id = await heldByAAtC();
    await releasedWhileAsleep(); // B judged A departed (A held nothing at B)
    leases.set(id, 'B', B.owners); // C handed the account over to B
    await reopenedAtB(id, 'A\'s sockets\' stream open and subscribed at B');
  });

  it('a reopen at the account\'s new owner that fails once (its lease store restarting) is made again, not given up', async () => {
    const id = await heldByAAtC();
    shards.B.failOnce.add('stream.sub');
    leases.set(id, 'B', B.owners); // C handed the account over to B; A's reopen of its sub there fails once
    await reopenedAtB(id, 'A\'s sockets\' stream open and subscribed at B', () => expect(shards.B.failOnce.size).toBe(0));
  });

  it('an owner\'s shard without the stream a node\'s socket holds there (its open lost): the socket\'s subscribe and snapshot open it there again and are answered, not NOT_FOUND', async () => {
    const id = await ownedByB();
    await A.router.call(id, 'stream.open', { accountId: id });
    await sub(A, id, 'BTCUSD');
    shards.B.streams.delete(id); // the shard let go of it without the ledger knowing
    await sub(A, id, 'EURUSD');
    await A.router.call(id, 'stream.snapshot', { accountId: id, timeoutMs: 1_000 });
    expect(shards.B.held(id)).toEqual({ sockets: 1, symbols: ['BTCUSD', 'EURUSD'] });
    await A.router.call(id, 'stream.close', { accountId: id });
    expect(shards.B.held(id)).toBeUndefined();
  });
});
