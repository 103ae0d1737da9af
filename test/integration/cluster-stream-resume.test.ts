// Issue 20 item 5: /v1/stream on any node sees the owner's numbering, and a client resumes on any
// node from the history in JetStream (docs/cluster.md "Streams and resume"). Three gateway
// processes, a simulator process, real nats-server (-js) and PostgreSQL.
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

describe('three nodes: one account stream', () => {
  it('a socket on a node that does not own the account gets the owner\'s frames, seq and epoch; a client resumes on another node with exactly what it missed', async () => {
    const acct = await env.cluster.account();
    const { owner, others } = await env.cluster.roles(acct.id);
    const url = (id: string) => env.cluster.node(id).url;
    const q = { apiKey: acct.key, id: acct.id };
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
    const acct = await env.cluster.account();
    const { owner, others } = await env.cluster.roles(acct.id);
    const url = (id: string) => env.cluster.node(id).url;
    const q = { apiKey: acct.key, id: acct.id };
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
});
