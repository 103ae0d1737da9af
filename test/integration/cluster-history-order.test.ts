// An account's frames stored out of seq order: a publish lost on its way to nats-server while the
// ones after it went through (as in a reconnect), so the owner's retry stores the lost lower seq
// after the higher ones. The account's last stored message must still be its highest seq (the
// owner stores it again after the retry): a next owner reads its head there and continues the
// epoch after it. Before, the head read the lower seq and the next owner numbered that epoch's
// seqs a second time (`npm run chaos`, seed 1399051437: eight TRADEs delivered twice). Two gateway
// processes, each reaching nats-server through a proxy of its own (the owner's proxy cuts one
// history publish out of the bytes it passes); real PostgreSQL and a simulator process.
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HISTORY_STREAM, historySubject } from '../../src/cluster/jsHistory.js';
import { useCluster, useNatsProxies, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia, retryingOrder } from '../helpers/clusterTraffic.js';
import { mustOpen } from '../helpers/stream-helpers.js';

const proxies = useNatsProxies(['a', 'b']);
const env = useCluster({ nodes: 2, nodeEnv: proxies.nodeEnv });

let acct: ClusterAccount;
let nc: NatsConnection;
beforeAll(async () => {
  acct = await env.cluster.account();
  nc = await connect({ servers: `127.0.0.1:${env.engines.nats.port}` });
}, 90_000);
afterAll(async () => {
  await nc?.close();
});

interface Stored { epoch: string; seq: number; frame: string }

/** Every message of the account's history, in stored order. */
async function storedFrames(accountId: string): Promise<Stored[]> {
  const jsm = await jetstreamManager(nc);
  const out: Stored[] = [];
  for (let at = 1; ;) {
    const m = await jsm.direct.getMessage(HISTORY_STREAM, { seq: at, next_by_subj: historySubject(accountId) });
    if (!m) return out;
    at = m.seq + 1;
    // Not a frame: a takeover's fence (it restates the head its owner continued from).
    if (m.header?.get('Tagw-Fence')) continue;
    out.push({ epoch: m.header?.get('Tagw-Epoch') ?? '', seq: Number(m.header?.get('Tagw-Seq')), frame: m.string() });
  }
}

/**
 * Cuts out of `chunk` the history publish (HPUB) of `subject` with the lowest seq, when the chunk
 * carries two or more whole ones: that frame never reaches nats-server, those after it do.
 */
function withoutLowestFrame(chunk: Buffer, subject: string): { bytes: Buffer; seq: number } | undefined {
  const text = chunk.toString('latin1');
  const found: Array<{ start: number; end: number; seq: number }> = [];
  for (let at = text.indexOf(`HPUB ${subject} `); at >= 0; at = text.indexOf(`HPUB ${subject} `, at + 1)) {
    const lineEnd = text.indexOf('\r\n', at);
    if (lineEnd < 0) return undefined;
    const total = Number(text.slice(at, lineEnd).split(' ').at(-1));
    const end = lineEnd + 2 + total + 2;
    if (end > text.length) return undefined;
    const seq = Number(/Tagw-Seq: (\d+)/.exec(text.slice(lineEnd, end))?.[1]);
    if (seq > 0) found.push({ start: at, end, seq });
  }
  if (found.length < 2) return undefined;
  const low = found.reduce((a, b) => (b.seq < a.seq ? b : a));
  return { bytes: Buffer.concat([chunk.subarray(0, low.start), chunk.subarray(low.end)]), seq: low.seq };
}

describe('an account\'s frames stored out of seq order', () => {
  it('the owner stores its highest frame again after the retry: the head is the highest seq, and the next owner numbers the epoch on from there: a client resuming there gets no frame whose number JetStream holds with other content', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const s = await mustOpen(env.cluster.node(owner).url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    try {
      await s.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the snapshot');
      let cut: number | undefined;
      const subject = historySubject(acct.id);
      proxies.of(owner).watch((dir, chunk) => {
        if (dir !== 'up' || cut !== undefined) return undefined;
        const w = withoutLowestFrame(chunk, subject);
        if (!w) return undefined;
        cut = w.seq;
        return { replace: w.bytes };
      });
      try {
        const sent = await orderVia(env.cluster.node(owner), acct, 'misordered-1');
        expect(sent.status, JSON.stringify(sent.body)).toBe(200);
        // Sent to the socket once stored: after the lost frame's ack timed out (5 s) and its retry.
        await s.until((c) => c.closed ?? c.of('TRADE').find((f) => f.data.comment === 'misordered-1'), 20_000, 'the TRADE');
      } finally {
        proxies.of(owner).watch(undefined);
      }
      expect(cut, 'no chunk of the owner carried two history frames of the order').toBeDefined();
      const stored = await storedFrames(acct.id);
      const order = stored.map((f) => f.seq);
      // The cut frame was stored by the retry, after one above it; the last stored is the highest.
      expect(order.indexOf(cut!), `stored order ${order.join(',')}`).toBeGreaterThan(order.indexOf(cut! + 1));
      expect(order.at(-1), `stored order ${order.join(',')}`).toBe(Math.max(...order));

      // The account moves (SIGTERM): the next owner continues the epoch after the highest seq.
      expect(await env.cluster.term(owner)).toBe(0);
      const after = await retryingOrder(env.cluster, acct, 'misordered-2', []);
      expect(after.status, JSON.stringify(after.body)).toBe(200);
      expect((await env.cluster.lease(acct.id)).owner).toBe(others[0]);
      // A client resuming on the next owner from the cut frame gets no frame whose number JetStream
      // holds with other content (before: the next owner numbered from the stale head, cut + 1,
      // again: its frames of those numbers, different ones, went to its sockets; JetStream's msg
      // ids kept the first of each).
      const epoch = stored.at(-1)!.epoch;
      const r = await mustOpen(env.cluster.node(others[0]!).url, { id: acct.id, heartbeat: '0', since: `${epoch}:${cut}` }, { 'x-api-key': acct.key });
      try {
        await r.until((c) => c.closed ?? c.of('TRADE').find((f) => f.data.comment === 'misordered-2') ?? c.of('ORDERS').find((f) => f.data.snapshot === true), 20_000, 'the order\'s TRADE or a snapshot');
        const held = new Map((await storedFrames(acct.id)).map((f) => [`${f.epoch}:${f.seq}`, f.frame]));
        // Not compared: a snapshot pair made for this socket (after RESUMED recovered:false), which
        // carries the number of the last frame with the lists as of it.
        const fresh = r.frames.find((f) => f.type === 'RESUMED')?.data.recovered === false;
        const numbered = r.frames.filter((f) => f.epoch !== undefined).filter((f, i) => !(fresh && i < 2 && f.data?.snapshot === true));
        const differing = numbered.filter((f) => held.has(`${f.epoch}:${f.seq}`) && JSON.stringify(JSON.parse(held.get(`${f.epoch}:${f.seq}`)!)) !== JSON.stringify(f));
        expect(differing.map((f) => `${f.epoch}:${f.seq} ${f.type}`)).toEqual([]);
      } finally {
        await r.close();
      }
    } finally {
      await s.close();
    }
  }, 120_000);
});
