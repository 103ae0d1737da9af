// Issue 20 item 5: /v1/stream on any node sees the owner's numbering, and a client resumes on any
// node from the history in JetStream (docs/cluster.md "Streams and resume"), across takeovers of
// the owner. Three gateway processes, a simulator process, real nats-server (-js) and PostgreSQL.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { expectAccountStream, mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const env = useCluster({ leaseMs: 1_500 });
const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const accountFrames = (c: StreamClient): Frame[] => c.frames.filter((f) => ACCOUNT.has(f.type));
/** The stream's own frames (not the socket's initial snapshot pair), as text: the same bytes on every node. */
const after = (c: StreamClient, epoch: string, seq: number): string[] =>
  accountFrames(c).filter((f) => f.epoch === epoch && f.seq > seq).map((f) => JSON.stringify(f));
const last = (c: StreamClient): Frame => accountFrames(c).at(-1)!;
const trades = (c: StreamClient) => c.of('TRADE').length;

/** An order through `url`, retried while the account changes owner (503) until accepted. */
async function order(url: string, key: string, id: string, coid: string): Promise<void> {
  await until(async () => (await orderSend(url, key, id, coid)).status === 200, `order ${coid} accepted`, 30_000);
}

const url = (id: string) => env.cluster.node(id).url;

/** A new account of the cluster, its owner, the other running nodes and its stream query. */
async function accountWithRoles() {
  const acct = await env.cluster.account();
  const { owner, others } = await env.cluster.roles(acct.id);
  return { acct, owner, others, q: { apiKey: acct.key, id: acct.id } };
}

describe('three nodes: one account stream', () => {
  it('a socket on a node that does not own the account gets the owner\'s frames, seq and epoch; a client resumes on another node with exactly what it missed', async () => {
    const { acct, owner, others, q } = await accountWithRoles();
    const onOwner = await mustOpen(url(owner), q);
    const elsewhere = await mustOpen(url(others[0]!), q);
    await Promise.all([onOwner, elsewhere].map((c) => c.next('POSITIONS', 0, 20_000)));
    for (let i = 0; i < 3; i++) await order(url(others[1]!), acct.key, acct.id, `same-${i}`);
    await Promise.all([onOwner, elsewhere].map((c) => c.until(() => trades(c) >= 3, 20_000, 'three TRADEs')));
    await until(() => last(onOwner).seq === last(elsewhere).seq, 'both sockets at the same seq');
    const snapO = accountFrames(onOwner)[0]!;
    const snapE = accountFrames(elsewhere)[0]!;
    expect(snapE.epoch).toBe(snapO.epoch);
    const from = Math.max(snapO.seq, snapE.seq);
    expect(after(elsewhere, snapO.epoch!, from)).toEqual(after(onOwner, snapO.epoch!, from));
    expect(elsewhere.of('TRADE')).toEqual(onOwner.of('TRADE'));
    expectAccountStream(onOwner.frames);
    expectAccountStream(elsewhere.frames);

    // A client leaves the non-owner, events happen, it resumes on the third node.
    const at = last(elsewhere);
    await elsewhere.close();
    for (let i = 0; i < 2; i++) await order(url(owner), acct.key, acct.id, `missed-${i}`);
    await onOwner.until(() => trades(onOwner) >= 5, 20_000, 'the missed TRADEs on the owner');
    const resumed = await mustOpen(url(others[1]!), { ...q, since: `${at.epoch}:${at.seq}` });
    const first = await resumed.next('RESUMED', 0, 20_000);
    expect(resumed.frames[0]!.type).toBe('RESUMED');
    expect(first.data).toMatchObject({ recovered: true });
    await until(() => accountFrames(resumed).length > 0 && last(resumed).seq === last(onOwner).seq, 'the resumed socket to catch up');
    expect(after(resumed, at.epoch!, at.seq)).toEqual(after(onOwner, at.epoch!, at.seq));
    expect(first.data.replayed).toBeGreaterThanOrEqual(2 * 2); // at least a TRADE and a POSITIONS per missed order
    await Promise.all([onOwner, resumed].map((c) => c.close()));
  }, 120_000);

  it('SIGKILL of the owner: the new owner continues the epoch; a socket elsewhere sees no gap, and a client resumes with recovered:true', async () => {
    const { acct, owner, others, q } = await accountWithRoles();
    const watcher = await mustOpen(url(others[0]!), q);
    const leaver = await mustOpen(url(others[1]!), q);
    await Promise.all([watcher, leaver].map((c) => c.next('POSITIONS', 0, 20_000)));
    await order(url(others[1]!), acct.key, acct.id, 'before-1');
    await Promise.all([watcher, leaver].map((c) => c.until(() => trades(c) >= 1, 20_000, 'the first TRADE')));
    await until(() => last(leaver).seq === last(watcher).seq, 'both sockets at the same seq');
    const at = last(leaver);
    await leaver.close();

    await env.cluster.kill(owner);
    await env.cluster.owner(acct.id, { not: owner });
    for (let i = 0; i < 2; i++) await order(url(others[0]!), acct.key, acct.id, `after-${i}`);
    await watcher.until(() => trades(watcher) >= 3, 30_000, 'the new owner\'s TRADEs');
    expect(watcher.closed).toBeNull();
    const stream = expectAccountStream(watcher.frames); // one epoch, no gap, no repeat
    expect(stream.at(-1)!.epoch).toBe(at.epoch);
    // Every deal once (the new owner's resync finds none missing twice).
    expect(new Set(watcher.of('TRADE').map((f) => f.data.ticket)).size).toBe(watcher.of('TRADE').length);

    const resumed = await mustOpen(url(others[1]!), { ...q, since: `${at.epoch}:${at.seq}` });
    const first = await resumed.next('RESUMED', 0, 20_000);
    expect(first.data).toMatchObject({ recovered: true });
    await until(() => accountFrames(resumed).length > 0 && last(resumed).seq >= last(watcher).seq, 'the resumed socket to catch up');
    const upTo = last(watcher).seq;
    const cut = (xs: string[]) => xs.filter((s) => (JSON.parse(s) as Frame).seq <= upTo);
    expect(cut(after(resumed, at.epoch!, at.seq))).toEqual(cut(after(watcher, at.epoch!, at.seq)));
    await Promise.all([watcher, resumed].map((c) => c.close()));
  }, 150_000);

  it('SIGKILL of the owner that alone held the account\'s stream (its client had left): the new owner keeps the stream and numbers the deals made since', async () => {
    const { acct, owner, others, q } = await accountWithRoles();
    const leaver = await mustOpen(url(owner), q);
    await leaver.next('ORDERS', 0, 20_000);
    await order(url(owner), acct.key, acct.id, 'held-1');
    await leaver.until(() => trades(leaver) >= 1, 20_000, 'the first TRADE');
    await until(() => accountFrames(leaver).at(-1)!.type === 'POSITIONS', 'the order\'s POSITIONS');
    const at = last(leaver);
    await leaver.close(); // the stream is held on the owner only, and dies with it
    await env.cluster.kill(owner);
    await env.cluster.owner(acct.id, { not: owner });
    const made = await orderSend(url(others[0]!), acct.key, acct.id, 'held-2');
    expect(made.status).toBe(200);
    const back = await mustOpen(url(others[0]!), { ...q, since: `${at.epoch}:${at.seq}` });
    expect((await back.next('RESUMED', 0, 20_000)).data).toMatchObject({ recovered: true });
    await back.until(() => trades(back) >= 1, 20_000, 'the TRADE of the order made after the handover');
    expect(back.of('TRADE').map((f) => f.data.order)).toEqual([made.ticket]);
    // The new owner's resync (a snapshot pair inside the stream), the TRADE, its POSITIONS: consecutive from the client's position.
    expect(accountFrames(back).map((f) => `${f.epoch}:${f.seq}`)).toEqual(accountFrames(back).map((_, i) => `${at.epoch}:${at.seq + 1 + i}`));
    await back.close();
  }, 90_000);

  it('fast-check: random schedules of orders, disconnects, reconnects to any node and a takeover of the owner (SIGTERM handover or SIGKILL): every account frame once, in order, every resume recovered', async () => {
    const acct = await env.cluster.account();
    const q = { apiKey: acct.key, id: acct.id };
    // A node that went down comes back in the background while the schedules go on (it may then
    // take the account over from its current owner: one more handover).
    const launching = new Set<Promise<unknown>>();
    let done = false; // a node still starting then is stopped with the others (not a failure)
    const relaunch = (id: string) => {
      const p: Promise<unknown> = env.cluster.launch(id)
        .catch((err: unknown) => done || console.log(`${id} did not start again:`, err))
        .finally(() => launching.delete(p));
      launching.add(p);
    };
    for (const n of env.cluster.nodes) if (n.state === 'down') relaunch(n.id); // the test before killed one
    /** Node indexes wrap around the nodes running at the time. */
    const live = (i: number) => {
      const r = env.cluster.running();
      return r[i % r.length]!;
    };
    let run = 0;
    const op = fc.oneof(
      fc.record({ t: fc.constant('order' as const), via: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ t: fc.constant('drop' as const) }),
      fc.record({ t: fc.constant('connect' as const), to: fc.integer({ min: 0, max: 2 }) }),
    );
    const takeover = fc.option(fc.record({ at: fc.nat(), how: fc.constantFrom('term' as const, 'kill' as const) }), { freq: 4 });
    await fc.assert(fc.asyncProperty(fc.array(op, { minLength: 2, maxLength: 8 }), takeover, fc.integer({ min: 0, max: 2 }), async (plain, move, firstNode) => {
      run++;
      const ops: Array<(typeof plain)[number] | { t: 'takeover'; how: 'term' | 'kill' }> = [...plain];
      if (move) ops.splice(move.at % (ops.length + 1), 0, { t: 'takeover', how: move.how });
      const got: Frame[] = []; // the client's account frames, all its connections, snapshot pair first
      const orders: number[] = [];
      let sock: StreamClient | undefined;
      let sockNode = '';
      let seen = 0;
      const take = () => {
        const fresh = sock!.frames.slice(seen);
        seen = sock!.frames.length;
        got.push(...fresh.filter((f) => ACCOUNT.has(f.type)));
      };
      const connect = async (to: number) => {
        const at = got.at(-1);
        const node = live(to);
        sock = await mustOpen(node.url, at ? { ...q, since: `${at.epoch}:${at.seq}` } : q);
        sockNode = node.id;
        seen = 0;
        if (at) expect((await sock.next('RESUMED', 0, 20_000)).data).toMatchObject({ recovered: true });
        else await sock.next('POSITIONS', 0, 20_000);
      };
      const drop = async () => {
        if (!sock) return;
        take();
        await sock.close();
        take();
        sock = undefined;
      };
      /** The owner leaves (handing the account over) or dies (its lease runs out); the client's socket on it ends. */
      const moveOwner = async (how: 'term' | 'kill') => {
        while (env.cluster.running().length < 2 && launching.size > 0) await Promise.race(launching);
        const { owner } = await env.cluster.roles(acct.id);
        if (how === 'term') await env.cluster.term(owner);
        else await env.cluster.kill(owner);
        if (sock && sockNode === owner) {
          await sock.until((c) => c.closed, 10_000, 'the socket on the old owner to end');
          await drop();
        }
        await env.cluster.owner(acct.id, { not: owner });
        relaunch(owner);
      };
      await connect(firstNode);
      for (const o of ops) {
        if (o.t === 'order') {
          const r = await orderSend(live(o.via).url, acct.key, acct.id, `prop-${run}-${orders.length}`);
          expect(r.status).toBe(200);
          orders.push(r.ticket!);
        } else if (o.t === 'drop') await drop();
        else if (o.t === 'takeover') await moveOwner(o.how);
        else if (!sock) await connect(o.to);
      }
      if (!sock) await connect(firstNode);
      try {
        await sock!.until((c) => c.of('TRADE').length + got.filter((f) => f.type === 'TRADE').length >= orders.length, 20_000, 'every order\'s TRADE');
      } catch (e) {
        const { owner } = await env.cluster.roles(acct.id);
        console.log('diagnostics: ops', JSON.stringify(ops), 'owner', owner, 'nodes', env.cluster.running().map((n) => n.id), 'got', JSON.stringify(got).slice(0, 2000));
        for (const n of env.cluster.running()) console.log('diagnostics:', n.id, n.proc.output().split('\n').filter((l) => /warn|error|stream|feed|shared/i.test(l)).slice(-30).join('\n'));
        throw e;
      }
      await drop();
      // One epoch; after the snapshot pair every frame one above the one before: none twice, none missing.
      expect(new Set(got.map((f) => f.epoch)).size, JSON.stringify(ops)).toBe(1);
      const stream = got.slice(got[1]?.type === 'ORDERS' && got[1].data.snapshot === true ? 2 : 1);
      stream.forEach((f, i) => expect(f.seq, JSON.stringify(ops)).toBe(got[0]!.seq + 1 + i));
      expect(stream.filter((f) => f.type === 'TRADE').map((f) => f.data.order), JSON.stringify(ops)).toEqual(orders);
    }), { numRuns: 6, endOnFailure: true }); // no shrinking: each run costs seconds of a whole cluster
    done = true;
  }, 240_000);
});
