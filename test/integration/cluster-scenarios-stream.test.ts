// Issue 20's stream scenarios with three gateway processes in cluster mode, a simulator process,
// real nats-server and PostgreSQL: a /v1/stream socket on a node that does not own the account
// sees the frames a socket on the owner sees; sockets on the survivors of a killed owner keep
// streaming from the new owner; a snapshot taken while the owner's frames wait for JetStream, and
// one whose wait for JetStream has no end (answered past its bound).
import { beforeAll, describe, expect, it } from 'vitest';
import { useCluster, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia, retryingOrder, type Answer } from '../helpers/clusterTraffic.js';
import { expectAccountStream, mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

// The snapshot bound short, so the frozen-JetStream case below ends in seconds (default 10 s).
const env = useCluster({ env: { STREAM_SNAPSHOT_STORE_WAIT_MS: '3000' } });
let acct: ClusterAccount;
beforeAll(async () => {
  acct = await env.cluster.account();
}, 60_000);

describe('three nodes: streams', () => {
  it('a /v1/stream socket on a node that does not own the account sees the frames a socket on the owner sees: quotes, then the account frames (POSITIONS, TRADE) of an order', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const sockets: Record<string, StreamClient> = {};
    for (const id of [owner, others[0]!]) {
      sockets[id] = await mustOpen(env.cluster.node(id).url, { id: acct.id }, { 'x-api-key': acct.key });
    }
    const onOwner = sockets[owner]!;
    const remote = sockets[others[0]!]!;
    try {
      for (const s of [onOwner, remote]) {
        await s.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
        s.send({ action: 'subscribe', symbol: 'BTCUSD' });
        await s.next('SUBSCRIBED', 0, 15_000);
      }
      // Quotes: the remote socket gets the owner's ticks (the same quotes, not copies made elsewhere).
      const quote = (f: Frame) => JSON.stringify([f.data.symbol, f.data.bid, f.data.ask, f.data.timeMsc ?? f.data.time]);
      await remote.until((c) => c.of('QUOTE').length >= 3, 15_000, 'three quotes on the remote socket');
      const seenRemote = remote.of('QUOTE').slice(-3).map(quote);
      await onOwner.until((c) => seenRemote.every((q) => c.of('QUOTE').map(quote).includes(q)), 15_000, 'the remote socket\'s quotes on the owner\'s socket');

      // An order through the third node: both sockets see its POSITIONS change and its TRADE, the same account frames.
      const marks = { [owner]: onOwner.frames.length, [others[0]!]: remote.frames.length };
      const sent = await orderVia(env.cluster.node(others[1]!), acct, 'stream-1');
      expect(sent.status, JSON.stringify(sent.body)).toBe(200);
      const trades: Record<string, Frame> = {};
      for (const [id, s] of Object.entries(sockets)) {
        trades[id] = await s.until((c) => c.frames.slice(marks[id]).find((f) => f.type === 'TRADE'), 15_000, `TRADE on ${id}`);
        await s.until((c) => c.frames.slice(marks[id]).find((f) => f.type === 'POSITIONS'), 15_000, `POSITIONS on ${id}`);
      }
      expect(trades[owner]!.data).toMatchObject({ order: sent.ticket, comment: 'stream-1' });
      expect(trades[others[0]!]!.data).toStrictEqual(trades[owner]!.data);
      const accountFrames = (s: StreamClient, from: number) => s.frames.slice(from).filter((f) => ['POSITIONS', 'ORDERS', 'TRADE'].includes(f.type)).map((f) => ({ type: f.type, data: f.data }));
      await remote.until(() => accountFrames(remote, marks[others[0]!]!).length >= accountFrames(onOwner, marks[owner]!).length, 10_000, 'as many account frames as on the owner');
      expect(accountFrames(remote, marks[others[0]!]!)).toStrictEqual(accountFrames(onOwner, marks[owner]!));
    } finally {
      await Promise.all(Object.values(sockets).map((s) => s.close()));
    }
  }, 90_000);

  it('a fresh socket on the owner while the account\'s events keep coming faster than JetStream stores them (nats-server frozen): an ERROR frame and close 4010 past STREAM_SNAPSHOT_STORE_WAIT_MS, never silence; after the thaw a new socket gets its snapshot', async () => {
    const { owner } = await env.cluster.roles(acct.id);
    const node = env.cluster.node(owner);
    const sockets: StreamClient[] = [];
    // The owner numbers the account's frames (its role taken, JetStream read) before the freeze.
    expect((await orderVia(node, acct, 'busy-before')).status).toBe(200);
    let answered = false;
    env.engines.nats.freeze();
    try {
      // Orders on the owner while JetStream stores nothing: each store waits for its ack timeout,
      // and a later event is numbered before it ends, so the snapshot is never caught up with.
      let placed = 0;
      const busy = (async () => {
        for (let i = 0; !answered && i < 400; i++, placed++) {
          // Buys and sells in turn (the account's margin holds), a few a second: more events than
          // JetStream's ack timeout lets by, fewer than the account's money runs out at.
          const sent = await orderVia(node, acct, `busy-${i}`, 20_000, i % 2 ? 'Sell' : 'Buy');
          expect(sent.status, JSON.stringify(sent.body)).toBe(200);
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      // Three answered: the socket must open with frames numbered and not stored. An order's answer
      // can come before its events reach the owner's hub, so after only one a snapshot could go out
      // at once (nothing pending) and the frames follow it live: CI saw that once, under heavy load.
      await until(() => placed > 2, 'three orders placed while frozen', 20_000);
      const client = await mustOpen(node.url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
      sockets.push(client);
      try {
        // A generous ceiling (the bound is 3 s by default): before, the socket waited with no answer.
        await client.until((c) => c.closed, 30_000, 'the socket closed for want of its snapshot');
      } finally {
        answered = true;
        await busy;
      }
      expect(client.closed!.code).toBe(4010);
      expect(client.of('ERROR').at(-1)?.data).toMatchObject({ error: 'SERVICE_UNAVAILABLE' });
      expect(client.of('POSITIONS')).toStrictEqual([]);
    } finally {
      answered = true;
      env.engines.nats.thaw();
    }
    // The fault cleared: a new socket on the owner gets its snapshot (the stores ended, acknowledged or timed out).
    const again = await mustOpen(node.url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    sockets.push(again);
    try {
      await again.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 20_000, 'the snapshot after the thaw');
      expect(again.closed).toBeNull();
    } finally {
      await Promise.all(sockets.map((s) => s.close()));
    }
  }, 120_000);

  it('SIGKILL of the owner: sockets on both survivors (the new owner and the other) keep their account stream without a gap and get the trade of an order placed after the takeover', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const sockets = await Promise.all(others.map((id) => mustOpen(env.cluster.node(id).url, { id: acct.id }, { 'x-api-key': acct.key })));
    try {
      for (const s of sockets) {
        await s.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
        s.send({ action: 'subscribe', symbol: 'BTCUSD' });
        await s.next('SUBSCRIBED', 0, 15_000);
        await s.until((c) => c.of('QUOTE').length >= 3, 15_000, 'quotes before the kill');
      }
      await env.cluster.kill(owner);
      const next = await env.cluster.owner(acct.id, { not: owner });
      const log: Answer[] = [];
      const sent = await retryingOrder(env.cluster, acct, 'stream-after-kill', log);
      expect(sent.status, JSON.stringify(sent.body)).toBe(200);
      for (const [i, s] of sockets.entries()) {
        const role = others[i] === next.owner ? 'the new owner' : 'the other survivor';
        await s.until((c) => c.of('TRADE').find((f) => f.data.comment === 'stream-after-kill'), 20_000, `the TRADE on ${role}`);
        const quotes = s.of('QUOTE').length;
        await s.until((c) => c.of('QUOTE').length >= quotes + 3, 15_000, `quotes after the takeover on ${role}`);
        expect(s.closed, role).toBeNull();
        expectAccountStream(s.frames);
      }
    } finally {
      await Promise.all(sockets.map((s) => s.close()));
    }
  }, 90_000);

  it('a socket opened on the owner while its frames wait for JetStream (nats-server frozen), the owner then killed: the client loses no frame of what follows', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const node = (id: string) => env.cluster.node(id);
    const watcher = await mustOpen(node(others[0]!).url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    const sockets = [watcher];
    try {
      await watcher.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the watcher\'s snapshot');
      // The owner numbers the account's frames (its role taken, JetStream read) before the freeze.
      const first = await orderVia(node(owner), acct, 'before-window');
      expect(first.status).toBe(200);
      await watcher.until((c) => c.of('TRADE').find((f) => f.data.order === first.ticket), 15_000, 'the first TRADE on the watcher');
      // Orders on the owner while JetStream stores nothing: it numbers their frames (more of them
      // than a new owner's resync makes of the same deals) but cannot store them.
      env.engines.nats.freeze();
      let client: StreamClient;
      try {
        for (let i = 0; i < 4; i++) expect((await orderVia(node(owner), acct, `window-${i}`)).status).toBe(200);
        client = await mustOpen(node(owner).url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
        sockets.push(client);
        await new Promise((r) => setTimeout(r, 500)); // the snapshot a socket gets at once, if any
        await env.cluster.kill(owner); // its frames never reach JetStream
      } finally {
        env.engines.nats.thaw();
      }
      const cursor = client.frames.filter((f) => ['POSITIONS', 'ORDERS', 'TRADE'].includes(f.type)).at(-1);
      await env.cluster.owner(acct.id, { not: owner });
      // Orders after the takeover: the new owner numbers past any position the client could hold.
      const after: number[] = [];
      for (let i = 0; i < 4; i++) {
        const sent = await retryingOrder(env.cluster, acct, `after-window-${i}`, []);
        expect(sent.status, JSON.stringify(sent.body)).toBe(200);
        after.push(sent.ticket!);
      }
      await watcher.until((c) => c.of('TRADE').find((f) => f.data.order === after.at(-1)), 20_000, 'the last TRADE on the watcher');
      // The client comes back where its stream stood: every TRADE after it (or a snapshot newer than them).
      const back = await mustOpen(node(others[0]!).url, { id: acct.id, heartbeat: '0', ...(cursor ? { since: `${cursor.epoch}:${cursor.seq}` } : {}) }, { 'x-api-key': acct.key });
      sockets.push(back);
      if (cursor) {
        const resumed = await back.next('RESUMED', 0, 15_000);
        if (resumed.data.recovered) {
          await back.until((c) => after.every((t) => c.of('TRADE').some((f) => f.data.order === t)), 15_000, `every TRADE after the client's position ${cursor.epoch}:${cursor.seq}`);
          return;
        }
      }
      await back.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'a fresh snapshot');
    } finally {
      env.engines.nats.thaw();
      await Promise.all(sockets.map((s) => s.close()));
    }
  }, 90_000);
  it('nats-server down past the store\'s ack timeout: the owner\'s socket gets no frame JetStream has not stored; once it is back, the order\'s TRADE comes once, and a resume from before it on another node replays it', async () => {
    // Found by `npm run chaos`: a frame whose store failed was sent to the owner's sockets all the
    // same; a later owner, continuing from JetStream, gave its number (and its deal) to other frames:
    // a client got eleven TRADEs twice.
    // The tests before killed owners: every node runs again, so another node can take the resume.
    for (const n of env.cluster.nodes) if (n.state === 'down') await env.cluster.launch(n.id);
    // A relaunched node takes its share back: the account may move once more (the plan's rounds,
    // a third of the lease apart). The test begins where it stays, on a node that keeps it.
    await stableOwner(acct.id);
    const { owner, others } = await env.cluster.roles(acct.id);
    const node = env.cluster.node(owner);
    const s = await mustOpen(node.url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    try {
      await s.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the snapshot');
      const at = s.frames.filter((f) => f.epoch !== undefined).at(-1)!;
      await env.engines.nats.kill();
      try {
        const sent = await orderVia(node, acct, 'held-1');
        expect(sent.status, JSON.stringify(sent.body)).toBe(200);
        // Past the 5 s ack timeout, after which the frames used to go out unstored.
        await new Promise((r) => setTimeout(r, 7_000));
        expect(s.of('TRADE').filter((f) => f.data.comment === 'held-1')).toEqual([]);
      } finally {
        await env.engines.nats.restart();
      }
      // (A 4014 here was an account moved right after the outage, its frames unstored:
      // cluster-rebalance-outage.test.ts.)
      await s.until((c) => c.closed ?? c.of('TRADE').find((f) => f.data.comment === 'held-1'), 20_000, 'the TRADE once JetStream is back');
      expect(s.closed).toBeNull();
      expect(s.of('TRADE').filter((f) => f.data.comment === 'held-1')).toHaveLength(1);
      const elsewhere = await mustOpen(env.cluster.node(others[0]!).url, { id: acct.id, heartbeat: '0', since: `${at.epoch}:${at.seq}` }, { 'x-api-key': acct.key });
      try {
        await elsewhere.until((c) => c.of('TRADE').find((f) => f.data.comment === 'held-1'), 20_000, 'the TRADE replayed on another node');
        expect(elsewhere.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
      } finally {
        await elsewhere.close();
      }
    } finally {
      await s.close();
    }
  }, 90_000);
});

/** The account's lease stays with one live owner for a whole lease (no move under way). */
async function stableOwner(accountId: string): Promise<void> {
  let seen = '';
  let since = Date.now();
  await until(async () => {
    const l = await env.cluster.lease(accountId);
    const now = `${l.live ? l.owner : ''}@${l.epoch}`;
    if (now !== seen || !l.live) [seen, since] = [now, Date.now()];
    return l.live && Date.now() - since >= env.cluster.leaseMs;
  }, `one owner of ${accountId} for a lease`, 30_000);
}
