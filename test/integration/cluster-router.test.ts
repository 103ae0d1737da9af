// The AccountRouter over a real nats-server: three in-process nodes, each with shards faked by a
// recorder (the real gateways are in cluster-gateways.test.ts), leases in memory.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { SUBJECTS } from '../../src/cluster/subjects.js';
import { ApiError, apiError } from '../../src/errors.js';
import { NotHeldError } from '../../src/cluster/moves.js';
import { NoReplyError, ReplyInbox } from '../../src/cluster/replyInbox.js';
import { AccountRouter, type LocalShards } from '../../src/cluster/router.js';
import { createLogger } from '../../src/log.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { MemoryLeases, startNode, type TestNode } from '../helpers/cluster.js';
import { until } from '../helpers/until.js';

/** Shards that answer with who ran the call, and fail, stall or refuse (as FencedShards does for an
 *  account whose lease it does not hold now: `refuse`) on request. */
function fakeShards(node: string) {
  const calls: Array<{ key: string; op: string; args: unknown; retry: boolean | undefined }> = [];
  let stall: Promise<void> | undefined;
  const refused = new Set<string>();
  const shards: LocalShards = {
    async call(key, op, args, opts) {
      calls.push({ key, op, args, retry: opts?.retryOnRestart });
      if (refused.has(key)) throw new NotHeldError(key);
      if (stall) await stall;
      const a = args as { args?: { fail?: boolean; failOn?: string; big?: number } };
      if (a.args?.big) return { node, rows: Array.from({ length: a.args.big }, (_, i) => ({ i, text: `déal ${i} ${'x'.repeat(200)}` })) } as never;
      if (a.args?.fail || a.args?.failOn === node) throw apiError('IDEMPOTENCY_UNCERTAIN', 'outcome unknown', { headers: { 'retry-after': '3' }, details: { clientOrderId: 'c1' } });
      return { node, key, echo: args, build: undefined, raw: Buffer.from([1, 2]), at: new Date(7) } as never;
    },
  };
  return { shards, calls, stallUntil: (p: Promise<void>) => (stall = p), refuse: (key: string, on = true) => void (on ? refused.add(key) : refused.delete(key)) };
}

let nats: Engine;
let leases: MemoryLeases;
const fakes = { A: fakeShards('A'), B: fakeShards('B'), C: fakeShards('C') };
let A: TestNode, B: TestNode, C: TestNode;
let n = 0;
const acct = () => `acc.${++n} *>`; // dots, wildcards and a space: must stay one subject token

beforeAll(async () => {
  nats = await startNats();
  leases = new MemoryLeases();
  [A, B, C] = await Promise.all((['A', 'B', 'C'] as const).map((id) => startNode(id, nats.url, fakes[id].shards, leases, { ownerWaitMs: 1_500 })));
});
afterAll(async () => {
  await Promise.all([A, B, C].map((x) => x?.close()));
  await nats?.stop();
});
beforeEach(() => {
  for (const f of Object.values(fakes)) f.calls.length = 0;
});

/** A trade without the caller's clientOrderId: its id is made on the owner, so it never runs at a
 *  second owner while the first may still be running it (moves.ts). */
const unkeyedTrade = (id: string) => A.router.call(id, 'account.trade', { accountId: id, op: 'OrderSend', args: {} }, { retryOnRestart: false });

/**
 * A call from A to `owner` (made the account's owner), which died as the call was sent: what
 * nats-server does for a moment after a SIGKILL, before it notices the closed connection. The dead
 * node's subject still has a subscriber (`ghost`), so the request is delivered and never answered.
 * `send`: the call (default an unkeyed trade, which waits for the dead owner's answer).
 */
async function callToGhost(id: string, owner: string, send: () => Promise<unknown> = () => unkeyedTrade(id)): Promise<{ ghost: NatsConnection; readonly outcome: unknown }> {
  const ghost = await connect({ servers: nats.url });
  const delivered: string[] = [];
  ghost.subscribe(SUBJECTS.nodeCall(owner), { callback: (_e, m) => void delivered.push(m.subject) });
  await ghost.flush();
  leases.set(id, owner, B.owners);
  await until(async () => (await A.owners.ownerOf(id)) === owner, 'A learns the owner');
  const r = { ghost, outcome: undefined as unknown };
  void send().then((v) => (r.outcome = v), (e: unknown) => (r.outcome = e));
  await until(() => delivered.length === 1, 'the call to reach the dead owner\'s subscription');
  return r;
}

describe('AccountRouter', () => {
  it('runs a call for an account owned here on the local shards, without NATS', async () => {
    const id = acct();
    leases.set(id, 'A', A.owners);
    const before = A.router.stats.forwarded;
    const r = await A.router.call(id, 'account.status', { accountId: id });
    expect(r).toMatchObject({ node: 'A', key: id });
    expect(A.router.stats.forwarded).toBe(before);
    expect(fakes.A.calls).toHaveLength(1);
  });

  it('forwards a call for an account owned elsewhere, and the result arrives as a shard reply would', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await C.owners.ownerOf(id)) === 'B', 'C learns the owner');
    const before = C.router.stats.forwarded;
    const r = await C.router.call(id, 'account.trade', { accountId: id, op: 'OrderSend', args: { symbol: 'X', volume: 0.01 }, clientOrderId: 'o1' }, { retryOnRestart: false });
    expect(r).toStrictEqual({
      node: 'B', key: id, echo: { accountId: id, op: 'OrderSend', args: { symbol: 'X', volume: 0.01 }, clientOrderId: 'o1' },
      build: undefined, raw: new Uint8Array([1, 2]), at: new Date(7),
    });
    expect(fakes.B.calls).toEqual([{ key: id, op: 'account.trade', args: expect.anything(), retry: false }]);
    expect(C.router.stats.forwarded).toBe(before + 1);
    expect(B.router.stats.served).toBeGreaterThan(0);
  });

  it('a reply larger than one NATS message (1 MiB) arrives whole, fetched in parts', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    const r = await C.router.call(id, 'account.op', { accountId: id, op: 'OrderHistory', args: { big: 15_000 } }) as { node: string; rows: Array<{ i: number; text: string }> };
    expect(r.node).toBe('B');
    expect(r.rows).toHaveLength(15_000);
    expect(Buffer.byteLength(JSON.stringify(r))).toBeGreaterThan(3 * 1_048_576);
    expect(r.rows[14_999]).toEqual({ i: 14_999, text: `déal 14999 ${'x'.repeat(200)}` });
  });

  it('an error on the owner arrives as the same ApiError (code, status, headers, details)', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    const err = await A.router.call(id, 'account.op', { accountId: id, op: 'x', args: { fail: true } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', status: 409, headers: { 'retry-after': '3' }, details: { clientOrderId: 'c1' } });
  });

  it('waits for an account without owner, and answers once one takes it', async () => {
    const id = acct();
    leases.set(id, null);
    const pending = A.router.call(id, 'account.status', { accountId: id });
    await until(() => A.router.stats.ownerWaits > 0, 'the call to wait');
    leases.set(id, 'C', C.owners);
    expect(await pending).toMatchObject({ node: 'C' });
  });

  it('a takeover whose announcement was lost (the new owner\'s NATS reconnecting): a call waiting on "no owner" looks the owner up again and lands there', async () => {
    const id = acct();
    leases.set(id, 'C', C.owners);
    leases.set(id, null, C.owners); // C handed it over: every node caches "no owner"
    await until(async () => (await A.owners.ownerOf(id)) === null && (await B.owners.ownerOf(id)) === null, 'A and B learn it has no owner');
    leases.set(id, 'B'); // B acquired it while its link was down: the announcement never went out
    // Before, the cached "no owner" was answered until the owner wait ran out: a 503 (and again for
    // every later call, until some announcement of this account came).
    expect(await A.router.call(id, 'account.status', { accountId: id })).toMatchObject({ node: 'B' });
  });

  it('answers 503 with retry-after when nobody takes the account within the bound', async () => {
    const id = acct();
    const err = await B.router.call(id, 'account.status', { accountId: id }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
  });

  it('a call that only stops what an owner runs (unownedIsDone: a removed seat\'s account) resolves undefined at once with no owner, on any node; with one it runs there', async () => {
    const id = acct();
    leases.set(id, null);
    // The removed seat's account released by its owner's lease round (it exists no more): its actors
    // stopped there, and nobody will take it. Before, the DELETE waited the owner wait and answered 503.
    const ownerWaits = [A, B].map((n) => n.router.stats.ownerWaits);
    for (const n of [A, B]) expect(await n.router.call(id, 'account.remove', { accountId: id }, { unownedIsDone: true })).toBeUndefined();
    expect([A, B].map((n) => n.router.stats.ownerWaits)).toEqual(ownerWaits); // neither waited for an owner
    expect(fakes.A.calls.concat(fakes.B.calls, fakes.C.calls).filter((c) => c.key === id)).toEqual([]);
    leases.set(id, 'C', C.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'C', 'A learns the owner');
    expect(await A.router.call(id, 'account.remove', { accountId: id }, { unownedIsDone: true })).toMatchObject({ node: 'C' });
    // The owner refusing it (handing it over): waited for as any call; its release done, nobody next: done.
    fakes.C.refuse(id);
    const [before, waits] = [fakes.C.calls.length, A.router.stats.ownerWaits];
    let outcome: unknown = 'pending';
    const refused = A.router.call(id, 'account.remove', { accountId: id }, { unownedIsDone: true }).then((v) => (outcome = v));
    await until(() => fakes.C.calls.length > before && A.router.stats.ownerWaits > waits, 'the owner to refuse the call, and the call to wait');
    expect(outcome).toBe('pending');
    leases.set(id, null, C.owners);
    expect(await refused).toBeUndefined();
    fakes.C.refuse(id, false);
  });

  it('the lease store failing behind the owner cache is a 503 with retry-after, not a 500', async () => {
    const id = acct();
    leases.failure = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    try {
      const err = await A.router.call(id, 'account.status', { accountId: id }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
      expect((err as Error).message).not.toMatch(/ECONNREFUSED|5432/);
    } finally {
      leases.failure = undefined;
    }
    leases.set(id, 'A', A.owners);
    expect(await A.router.call(id, 'account.status', { accountId: id })).toMatchObject({ node: 'A' });
  });

  it('follows the account when its owner changed unannounced (stale cache): the old owner says so', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'B' && (await C.owners.ownerOf(id)) === 'B', 'A and C learn the owner');
    // The lease moves to C, the announcement is lost (C announces nothing), B knows it lost it.
    leases.set(id, 'C');
    B.owners.forget(id);
    C.owners.forget(id);
    const r = await A.router.call(id, 'account.status', { accountId: id });
    expect(r).toMatchObject({ node: 'C' });
    expect(fakes.B.calls).toHaveLength(0);
  });

  it('an owner gone mid-flight (no responders): the call waits for the takeover and lands on the new owner', async () => {
    const id = acct();
    const fakeD = fakeShards('D');
    const D = await startNode('D', nats.url, fakeD.shards, leases);
    leases.set(id, 'D', D.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'D', 'A learns the owner');
    await D.close(); // killed: no release, no announcement; its lease lingers
    const pending = A.router.call(id, 'account.status', { accountId: id });
    await until(() => A.router.stats.ownerWaits > 0, 'the call to wait');
    leases.set(id, 'B', B.owners); // the lease expired; B took over
    expect(await pending).toMatchObject({ node: 'B' });
    expect(fakeD.calls).toHaveLength(0);
  });

  it('an owner that does not answer within the call bound is a 503 (outcome unknown); a closed router fails its waiting calls', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'B', 'A learns the owner');
    // A second router on A's connection, with a short bound (the gateway's is 31 s).
    const quick = new AccountRouter({ nodeId: 'A2', link: A.link, shards: fakes.A.shards, owners: A.owners, log: createLogger('silent'), ownerWaitMs: 1_500, forwardTimeoutMs: 300 });
    const routers = [quick];
    let release!: () => void;
    fakes.B.stallUntil(new Promise<void>((r) => (release = r)));
    try {
      const err = await quick.call(id, 'account.status', { accountId: id }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
      expect((err as Error).message).toMatch(/did not answer account\.status in time; its outcome is unknown/);
      // Closed while a call waits: a router whose bound no loaded machine reaches (with `quick`'s
      // 300 ms, the wait for the owner to be running the call raced that bound).
      const closing = new AccountRouter({ nodeId: 'A3', link: A.link, shards: fakes.A.shards, owners: A.owners, log: createLogger('silent'), ownerWaitMs: 1_500, forwardTimeoutMs: 60_000 });
      routers.push(closing);
      const waiting = closing.call(id, 'account.status', { accountId: id }).catch((e: unknown) => e);
      await until(() => fakes.B.calls.length === 2, 'the owner to be running the second call');
      closing.close();
      const closed = await waiting;
      expect(closed).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
      expect((closed as Error).message).toMatch(/failed during account\.status/); // at once, not the bound
    } finally {
      release();
      fakes.B.stallUntil(Promise.resolve());
      for (const r of routers) r.close();
    }
    // The owner answering late to a closed inbox harms nothing; the node's own router still forwards.
    expect(await A.router.call(id, 'account.status', { accountId: id })).toMatchObject({ node: 'B' });
  });

  it('an owner killed as an unkeyed trade was sent (nats-server still delivers to its subscription; nobody answers): once another node takes the account, a 503 after the owner wait, not the 31 s call bound', async () => {
    const id = acct();
    const stranded = await callToGhost(id, 'E');
    leases.set(id, 'B', B.owners); // its lease expired; B took the account over
    await until(() => stranded.outcome !== undefined, 'the call to end once the account moved (it hung until the 31 s bound)', 10_000);
    expect(stranded.outcome).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
    expect((stranded.outcome as Error).message).toMatch(/outcome is unknown/);
    // The client's retry lands on the new owner.
    expect(await A.router.call(id, 'account.status', { accountId: id })).toMatchObject({ node: 'B' });
    await stranded.ghost.close();
  });

  it('an owner killed as an unkeyed trade was sent and back under the same id at a later epoch (restarted within the lease): the call ends with a 503 after the owner wait, not the 31 s call bound', async () => {
    const id = acct();
    const stranded = await callToGhost(id, 'F');
    const epoch = leases.set(id, 'F', B.owners).epoch; // F restarted and took its account back
    await until(() => A.owners.known(id)?.epoch === epoch, 'A learns the new epoch');
    await until(() => stranded.outcome !== undefined, 'the call to end once its owner came back at a new epoch (it hung until the 31 s bound)', 10_000);
    expect(stranded.outcome).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
    expect((stranded.outcome as Error).message).toMatch(/outcome is unknown/);
    await stranded.ghost.close();
  });

  it('an owner that answers an unkeyed trade after the account moved on still gets its answer through (within the owner wait)', async () => {
    const id = acct();
    leases.set(id, 'C', C.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'C', 'A learns the owner');
    let release!: () => void;
    fakes.C.stallUntil(new Promise<void>((r) => (release = r)));
    const pending = unkeyedTrade(id);
    await until(() => fakes.C.calls.length === 1, 'the owner to be running the call');
    leases.set(id, 'B', B.owners); // C lost the lease (paused, cut off) while running it
    await until(async () => (await A.owners.ownerOf(id)) === 'B', 'A learns the new owner');
    release();
    expect(await pending).toMatchObject({ node: 'C' });
    fakes.C.stallUntil(Promise.resolve());
    expect(fakes.B.calls).toHaveLength(0);
  });

  // ownerWaitMs is 1.5 s here: before, each of these ended in a 503 once it ran out (or, for a
  // refusal by the owner, at once).
  it('a call the new owner may run too (a read; a trade with the caller\'s clientOrderId), stranded at an owner killed as it was sent, goes to the new owner as soon as it is known', async () => {
    for (const send of [
      (id: string) => A.router.call(id, 'account.status', { accountId: id }),
      (id: string) => A.router.call(id, 'account.trade', { accountId: id, op: 'OrderSend', args: {}, clientOrderId: 'k-1' }, { retryOnRestart: false }),
    ]) {
      const id = acct();
      const stranded = await callToGhost(id, 'G', () => send(id));
      leases.set(id, 'B', B.owners); // its lease expired; B took the account over
      await until(() => stranded.outcome !== undefined, 'the call to end once the account moved');
      expect(stranded.outcome).toMatchObject({ node: 'B', key: id });
      await stranded.ghost.close();
    }
  });

  it('a keyed trade moved on while its old owner runs it: the new owner found the old one\'s claim (409 uncertain), so the old owner\'s late answer is the one given', async () => {
    const id = acct();
    leases.set(id, 'C', C.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'C', 'A learns the owner');
    let release!: () => void;
    fakes.C.stallUntil(new Promise<void>((r) => (release = r)));
    const pending = A.router.call(id, 'account.trade', { accountId: id, op: 'OrderSend', args: { failOn: 'B' }, clientOrderId: 'k-2' }, { retryOnRestart: false });
    await until(() => fakes.C.calls.length === 1, 'the owner to be running the call');
    leases.set(id, 'B', B.owners);
    await until(() => fakes.B.calls.length === 1, 'the new owner to be asked too');
    release();
    expect(await pending).toMatchObject({ node: 'C' });
    fakes.C.stallUntil(Promise.resolve());
  });

  it('a keyed trade with no owner within the wait (a handover or takeover under way; it may have reached an owner that went away with it): 503 that says to retry with the same clientOrderId; other calls just to retry', async () => {
    const keyed = await A.router.call(acct(), 'account.trade', { accountId: 'x', op: 'OrderSend', args: {}, clientOrderId: 'k-4' }, { retryOnRestart: false }).catch((e: unknown) => e);
    expect(keyed).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
    expect((keyed as Error).message).toMatch(/no reachable owner yet .*; retry with the same clientOrderId/);
    const plain = await A.router.call(acct(), 'account.status', { accountId: 'x' }).catch((e: unknown) => e);
    expect(plain).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503 });
    expect((plain as Error).message).not.toMatch(/clientOrderId/);
  });

  it('a keyed trade stranded at a dead owner whose claim the new owner found: the new owner\'s 409 once the old one gave no answer within the owner wait', async () => {
    const id = acct();
    const stranded = await callToGhost(id, 'H', () => A.router.call(id, 'account.trade', { accountId: id, op: 'OrderSend', args: { failOn: 'B' }, clientOrderId: 'k-3' }, { retryOnRestart: false }));
    leases.set(id, 'B', B.owners);
    await until(() => stranded.outcome !== undefined, 'the call to end once the account moved and the owner wait passed', 10_000);
    expect(stranded.outcome).toMatchObject({ code: 'IDEMPOTENCY_UNCERTAIN', status: 409 });
    expect(fakes.B.calls.filter((c) => c.key === id)).toHaveLength(1);
    await stranded.ghost.close();
  });

  it('an owner that refuses a call because it no longer holds the account (handing it over, lease lapsed): the call waits for the next owner and lands there, from another node or on the old owner itself', async () => {
    // [caller, next owner]: from another node (A), and on the old owner itself (B).
    for (const [from, next] of [[A, C], [B, A]] as const) {
      const id = acct();
      leases.set(id, 'B', B.owners);
      await until(async () => (await from.owners.ownerOf(id)) === 'B', 'the caller learns the owner');
      fakes.B.refuse(id);
      const pending = from.router.call(id, 'account.status', { accountId: id });
      await until(() => fakes.B.calls.some((c) => c.key === id), 'the owner to refuse the call');
      leases.set(id, null, B.owners); // handed over: released
      leases.set(id, next.id, next.owners);
      expect(await pending).toMatchObject({ node: next.id });
      fakes.B.refuse(id, false);
    }
  });

  it('stream interest of several nodes composes on the owner: one node\'s unsub keeps what another holds', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'B' && (await C.owners.ownerOf(id)) === 'B', 'A and C learn the owner');
    const shardGot = () => fakes.B.calls.map((c) => [c.op, c.args]);
    await B.router.call(id, 'stream.open', { accountId: id }); // the owner's own sockets
    await B.router.call(id, 'stream.sub', { accountId: id, symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 });
    await C.router.call(id, 'stream.open', { accountId: id }); // another node's
    await C.router.call(id, 'stream.sub', { accountId: id, symbol: 'EURUSD', timeframes: ['M1', 'H1'], timeoutMs: 1_000 });
    await C.router.call(id, 'stream.sub', { accountId: id, symbol: 'GBPUSD', timeframes: [], timeoutMs: 1_000 });
    fakes.B.calls.length = 0;
    await C.router.call(id, 'stream.unsub', { accountId: id, symbol: 'EURUSD' });
    expect(shardGot()).toEqual([['stream.unsub', { accountId: id, symbol: 'EURUSD', timeframes: ['H1'] }]]);
    fakes.B.calls.length = 0;
    // C goes away without closing: the owner releases what only C held, and C's open.
    await B.router.streams.forgetNode('C');
    expect(shardGot()).toEqual([['stream.unsub', { accountId: id, symbol: 'GBPUSD' }], ['stream.close', { accountId: id }]]);
    fakes.B.calls.length = 0;
    await B.router.call(id, 'stream.unsub', { accountId: id, symbol: 'EURUSD' });
    expect(shardGot()).toEqual([['stream.unsub', { accountId: id, symbol: 'EURUSD' }]]);
  });

  it('a node\'s new process (a later incarnation, same id): the owner releases what the earlier one held before its first stream command runs, and refuses the earlier one\'s commands after', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    const [old, fresh] = await Promise.all([1, 2].map((incarnation) => startNode('D', nats.url, fakeShards('D').shards, leases, { ownerWaitMs: 1_500, incarnation })));
    try {
      await until(async () => (await old!.owners.ownerOf(id)) === 'B' && (await fresh!.owners.ownerOf(id)) === 'B', 'both learn the owner');
      // This account's calls only: node C of the test before, forgotten by B, opens again there what
      // it still holds (ci24: its stream.sub of the account before came in between).
      const shardGot = () => fakes.B.calls.filter((c) => c.key === id).map((c) => [c.op, c.args]);
      await old!.router.call(id, 'stream.open', { accountId: id });
      await old!.router.call(id, 'stream.sub', { accountId: id, symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 });
      fakes.B.calls.length = 0;
      await fresh!.router.call(id, 'stream.open', { accountId: id });
      expect(shardGot()).toEqual([
        ['stream.unsub', { accountId: id, symbol: 'EURUSD' }], ['stream.close', { accountId: id }], ['stream.open', { accountId: id }],
      ]);
      fakes.B.calls.length = 0;
      const late = await old!.router.call(id, 'stream.sub', { accountId: id, symbol: 'GBPUSD', timeframes: [], timeoutMs: 1_000 }).catch((e: unknown) => e);
      expect(late).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
      expect(shardGot()).toEqual([]);
      // The node list showing the same incarnation again changes nothing.
      expect(await B.router.streams.supersede('D', 2)).toBe(true);
      expect(shardGot()).toEqual([]);
    } finally {
      await Promise.all([old?.close(), fresh?.close()]);
    }
  });

  it('when the account changes owner, a node reopens its sockets\' stream at the new owner (remote or itself)', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await C.owners.ownerOf(id)) === 'B', 'C learns the owner');
    await C.router.call(id, 'stream.open', { accountId: id });
    await C.router.call(id, 'stream.sub', { accountId: id, symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 });
    await C.router.call(id, 'stream.sub', { accountId: id, symbol: 'GBPUSD', timeframes: [], timeoutMs: 1_000 });
    await C.router.call(id, 'stream.unsub', { accountId: id, symbol: 'GBPUSD' });
    const streamOps = (f: ReturnType<typeof fakeShards>) => f.calls.filter((c) => c.key === id).map((c) => [c.op, (c.args as { symbol?: string }).symbol]);
    const replays = C.router.stats.streamReplays;
    leases.set(id, 'A', A.owners); // B handed it over (or died): A's shard knows nothing of C's sockets
    await until(() => C.router.stats.streamReplays === replays + 1, 'C to reopen at A');
    expect(streamOps(fakes.A)).toEqual([['stream.open', undefined], ['stream.sub', 'EURUSD']]);
    leases.set(id, 'C', C.owners); // now C itself owns it: its own shard gets them
    await until(() => C.router.stats.streamReplays === replays + 2, 'C to reopen on itself');
    expect(streamOps(fakes.C)).toEqual([['stream.open', undefined], ['stream.sub', 'EURUSD']]);
    await C.router.call(id, 'stream.close', { accountId: id });
    fakes.B.calls.length = 0;
    leases.set(id, 'B', B.owners); // nothing held any more: nothing reopened
    await until(async () => (await C.owners.ownerOf(id)) === 'B', 'C learns the owner');
    // A reopen would have been sent (from the same connection) before this call.
    await C.router.call(id, 'account.status', { accountId: id });
    expect(streamOps(fakes.B)).toEqual([['account.status', undefined]]);
    expect(C.router.stats.streamReplays).toBe(replays + 2);
  });

  it('when the owner takes the account back at a later epoch (restarted under its NODE_ID, or its lease lost and retaken), every node reopens its sockets\' stream there, the owner on its own shards too', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await C.owners.ownerOf(id)) === 'B', 'C learns the owner');
    await B.router.call(id, 'stream.open', { accountId: id }); // the owner's own sockets
    await C.router.call(id, 'stream.open', { accountId: id });
    await C.router.call(id, 'stream.sub', { accountId: id, symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 });
    const streamOps = () => fakes.B.calls.filter((c) => c.key === id).map((c) => [c.op, (c.args as { symbol?: string }).symbol]);
    fakes.B.calls.length = 0;
    const replays = { B: B.router.stats.streamReplays, C: C.router.stats.streamReplays };
    leases.set(id, 'B', B.owners); // the same owner, epoch 2: its shard started the account afresh
    await until(() => C.router.stats.streamReplays === replays.C + 1 && B.router.stats.streamReplays === replays.B + 1, 'B and C to reopen at B');
    expect(streamOps().filter(([op]) => op === 'stream.open')).toHaveLength(2);
    expect(streamOps().filter(([op]) => op === 'stream.sub')).toEqual([['stream.sub', 'EURUSD']]);
    // The same epoch announced again (a repeated announcement) reopens nothing.
    B.owners.announce(id, { owner: 'B', epoch: 2 });
    await C.router.call(id, 'account.status', { accountId: id });
    expect(C.router.stats.streamReplays).toBe(replays.C + 1);
  });

  it('a stream command that reaches the owner at an epoch this node has not heard of yet (the announcement still on the way) reopens the streams held before it, once: not the new one again', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await C.owners.ownerOf(id)) === 'B', 'C learns the owner');
    await C.router.call(id, 'stream.open', { accountId: id });
    await C.router.call(id, 'stream.sub', { accountId: id, symbol: 'EURUSD', timeframes: ['M1'], timeoutMs: 1_000 });
    // B takes the account back at epoch 2 and knows it; C has not been told yet.
    const { epoch } = leases.set(id, 'B');
    B.owners.forget(id);
    expect(C.owners.known(id)?.epoch).toBe(epoch - 1);
    fakes.B.calls.length = 0;
    const replays = C.router.stats.streamReplays;
    await C.router.call(id, 'stream.open', { accountId: id }); // another socket on C
    await until(() => C.router.stats.streamReplays === replays + 1, 'C to reopen at B what it held before');
    expect(C.owners.known(id)?.epoch).toBe(epoch);
    // The announcement arrives after: nothing more to reopen.
    B.owners.announce(id, { owner: 'B', epoch });
    await C.router.call(id, 'account.status', { accountId: id });
    const ops = fakes.B.calls.filter((c) => c.key === id).map((c) => c.op);
    expect(ops.filter((op) => op === 'stream.open')).toHaveLength(2); // the new socket's and the one reopened: one each
    expect(ops.filter((op) => op === 'stream.sub')).toHaveLength(1);
    expect(C.router.stats.streamReplays).toBe(replays + 1);
  });

  it('a forwarded call in flight when NATS goes down is a 503 after the owner wait, not the 31 s call bound', async () => {
    const id = acct();
    leases.set(id, 'B', B.owners);
    await until(async () => (await A.owners.ownerOf(id)) === 'B', 'A learns the owner');
    let release!: () => void;
    fakes.B.stallUntil(new Promise<void>((r) => (release = r)));
    const pending = A.router.call(id, 'account.status', { accountId: id }).then((r) => r, (e: unknown) => e);
    await until(() => fakes.B.calls.length === 1, 'the owner to be running the call');
    await nats.kill();
    const t0 = performance.now();
    const err = await pending;
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
    expect((err as Error).message).toMatch(/outcome is unknown/);
    expect(performance.now() - t0).toBeLessThan(10_000);
    release();
    fakes.B.stallUntil(Promise.resolve());
    await nats.restart();
    await until(() => A.link.up && B.link.up, 'both nodes back on NATS');
  });

  it('with NATS down a forwarded call is a clean 503 at once, a local one still runs; all recovers by itself', async () => {
    const remote = acct();
    const local = acct();
    leases.set(remote, 'B', B.owners);
    leases.set(local, 'A', A.owners);
    await until(async () => (await A.owners.ownerOf(remote)) === 'B', 'A learns the owner');
    await nats.kill();
    await until(() => !A.link.up, 'A to see NATS down');
    const t0 = performance.now();
    const err = await A.router.call(remote, 'account.status', { accountId: remote }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
    expect(performance.now() - t0).toBeLessThan(10_000); // a hang guard: not the forwarding timeout (31 s)
    expect(await A.router.call(local, 'account.status', { accountId: local })).toMatchObject({ node: 'A' });
    await nats.restart();
    await until(() => A.link.up && B.link.up, 'both nodes back on NATS');
    await until(async () => {
      const r = await A.router.call(remote, 'account.status', { accountId: remote }).catch(() => null);
      return (r as { node?: string } | null)?.node === 'B';
    }, 'a forwarded call to succeed again');
  });
});

describe('ReplyInbox', () => {
  it('one timer bounds every waiting call at its own deadline, the earliest first whatever the order sent; an answered call never fails; calls end by tag or at close', async () => {
    const nc = await connect({ servers: nats.url });
    nc.subscribe('inbox-test.silent', { callback: () => {} });
    nc.subscribe('inbox-test.echo', { callback: (_e, m) => void m.respond(m.data) });
    await nc.flush();
    const inbox = new ReplyInbox<string>(nc);
    const t0 = performance.now();
    const ended: Array<{ tag: string; how: string; ms: number }> = [];
    const track = (tag: string, p: Promise<unknown>) => p.then(
      () => void ended.push({ tag, how: 'reply', ms: performance.now() - t0 }),
      (e: unknown) => void ended.push({ tag, how: e instanceof NoReplyError ? e.reason : String(e), ms: performance.now() - t0 }),
    );
    // The longer bound first: the timer armed for it must be brought forward for the shorter one.
    // Had it not been, both would fail in the same expiry, in the order sent (long first). The
    // answered call's bound is far beyond its reply: whether an echo beats a 200 ms timer on a
    // loaded machine is not what this proves.
    await Promise.all([
      track('long', inbox.request('inbox-test.silent', 'x', 2_000, 'long')),
      track('short', inbox.request('inbox-test.silent', 'x', 200, 'short')),
      track('answered', inbox.request('inbox-test.echo', 'hi', 60_000, 'answered')),
    ]);
    const how = (tag: string) => ended.find((e) => e.tag === tag)!;
    expect(how('answered').how).toBe('reply');
    expect(ended.filter((e) => e.how === 'timeout').map((e) => e.tag)).toEqual(['short', 'long']);
    // Each at its own bound, never before it (the inbox reads the same monotonic clock after t0).
    expect(how('short').ms).toBeGreaterThanOrEqual(200);
    expect(how('long').ms).toBeGreaterThanOrEqual(2_000);
    expect(inbox.pending).toBe(0);
    const a = inbox.request('inbox-test.silent', 'x', 30_000, 'a');
    const b = inbox.request('inbox-test.silent', 'x', 30_000, 'b');
    inbox.abort(inbox.waitingIds((t) => t === 'a'), (t) => new Error(`ended ${t}`));
    await expect(a).rejects.toThrow('ended a');
    expect(inbox.pending).toBe(1);
    inbox.close();
    await expect(b).rejects.toMatchObject({ reason: 'closed' });
    await nc.close();
  });
});
