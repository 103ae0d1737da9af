// Two processes under one NODE_ID for a while (a restarted process beside a frozen or not yet exited
// earlier one): both subscribed to the id's call subject, one holding the account's lease, the other
// refusing ("not held here", as FencedShards does once its lease is gone). Each forwarded call must
// run once: the id's call subscription is a queue group (callServer.ts), so a refusal comes only from
// a process that alone got the call. Routers over a real nats-server, shards faked by recorders,
// leases in memory (the process-level case: cluster-restart-reclaim's SIGSTOP test).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotHeldError } from '../../src/cluster/moves.js';
import type { LocalShards } from '../../src/cluster/router.js';
import { MemoryLeases, startNode, type TestNode } from '../helpers/cluster.js';
import { startNats, type Engine } from '../helpers/engines.js';
import { until } from '../helpers/until.js';

/** The holder's shards: each call recorded, held until `open` (so a refusal, if the twin got the
 *  same call, arrives at the forwarding node first), then answered by who ran it. */
function holderShards() {
  const ran: Array<{ key: string; comment: unknown }> = [];
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const shards: LocalShards = {
    async call(key, _op, args) {
      const a = args as { args?: { comment?: unknown; big?: number } };
      ran.push({ key, comment: a.args?.comment });
      await gate;
      if (a.args?.big) return { rows: Array.from({ length: a.args.big }, (_, i) => ({ i, text: 'x'.repeat(200) })) } as never;
      return { ranAt: 'holder', comment: a.args?.comment } as never;
    },
  };
  return { shards, ran, open };
}

/** The twin's shards: every call refused before it ran (its lease is gone). */
function twinShards() {
  const refused: string[] = [];
  const shards: LocalShards = {
    call(key) {
      refused.push(key);
      return Promise.reject(new NotHeldError(key));
    },
  };
  return { shards, refused };
}

let nats: Engine;
let leases: MemoryLeases;
const holder = holderShards();
const twin = twinShards();
let F: TestNode, B: TestNode, B2: TestNode;

beforeAll(async () => {
  nats = await startNats();
  leases = new MemoryLeases();
  // F forwards; its owner wait is long so that a call the twin refused several times in a row (each
  // copy goes to one process of B, picked at random) still reaches the holder within it.
  F = await startNode('F', nats.url, twinShards().shards, leases, { ownerWaitMs: 15_000 });
  B = await startNode('B', nats.url, holder.shards, leases, { incarnation: 2 });
  B2 = await startNode('B', nats.url, twin.shards, leases, { incarnation: 1 });
});
afterAll(async () => {
  await Promise.all([F, B, B2].map((x) => x?.close()));
  await nats?.stop();
});

describe('two processes subscribed under one NODE_ID, one of them not holding the lease', () => {
  it('each order without clientOrderId forwarded to the id runs once, at the holder', async () => {
    const id = 'acc-twin';
    leases.set(id, 'B', B.owners);
    await until(async () => (await F.owners.ownerOf(id)) === 'B', 'F learns the owner');
    const tags = Array.from({ length: 16 }, (_, i) => `unkeyed-${i}`);
    const answers = Promise.all(tags.map((comment) => F.router.call(id, 'account.trade', { accountId: id, op: 'OrderSend', args: { comment } }, { retryOnRestart: false })));
    // Every order reached one process of B or the other before the holder answers any.
    await until(() => holder.ran.length + twin.refused.length >= tags.length, 'the orders to reach B');
    holder.open();
    expect(await answers).toEqual(tags.map((comment) => ({ ranAt: 'holder', comment })));
    // Before (a plain subscription): the twin refused each copy it got first, F sent it again, and
    // the holder ran both copies: 32 orders for 16 requests.
    expect(holder.ran.map((r) => r.comment).sort()).toEqual([...tags].sort());
    // The twin was in the group and refused its share (one in 2^16 runs it got none).
    expect(twin.refused.length).toBeGreaterThan(0);
  });

  it('a reply too large for one message is fetched in parts from the process that made it (the twin stays silent)', async () => {
    const id = 'acc-twin-big';
    leases.set(id, 'B', B.owners);
    await until(async () => (await F.owners.ownerOf(id)) === 'B', 'F learns the owner');
    const r = await F.router.call(id, 'account.op', { accountId: id, op: 'OrderHistory', args: { big: 15_000 } }) as { rows: Array<{ i: number }> };
    // Before: the twin answered every part request it did not know with an empty part, often first (a 503).
    expect(r.rows).toHaveLength(15_000);
    expect(r.rows[14_999]).toMatchObject({ i: 14_999 });
  });
});
