// A dead owner's history publish that reaches nats-server after another node took the account over
// (a "ghost": the bytes were in flight, in a kernel buffer or a stalled path, when the owner
// stopped; nats-server reads and stores them later). `npm run chaos`, seed 1121554353 schedule 24:
// nats-server frozen, the owner killed meanwhile; at the thaw the new owner read the head (the
// epoch's seq 0), then the dead owner's publishes of seqs 1-2 were stored, and the new owner's own
// seqs 1-2 (a TRADE among them) were answered as duplicates of their msg ids (account, epoch, seq)
// and taken as stored: its sockets got its frames, JetStream kept the dead owner's, and a client
// resuming from JetStream never got that TRADE. docs/cluster.md "Streams and resume".
//
// Three gateway processes, each reaching nats-server through a proxy of its own; real PostgreSQL
// and a simulator process. The owner's proxy holds its history publishes of an order's frames; the
// owner is frozen (SIGSTOP) and its lease runs out; the proxies of the other nodes hold the new
// owner's history publishes until the dead owner's have been stored (released while it is frozen:
// its connection still open), then pass them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { HISTORY_STREAM, historySubject } from '../../src/cluster/jsHistory.js';
import { useCluster, useNatsProxies } from '../helpers/clusterProcs.js';
import { orderVia, retryingOrder } from '../helpers/clusterTraffic.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

const proxies = useNatsProxies(['a', 'b', 'c']);
const env = useCluster({ nodeEnv: proxies.nodeEnv });

let nc: NatsConnection;
beforeAll(async () => {
  nc = await connect({ servers: `127.0.0.1:${env.engines.nats.port}` });
}, 90_000);
afterAll(async () => {
  await nc?.close();
});

/** The account's stored messages (whoever wrote them), in stored order: number, writer's lease, fence or not. */
async function storedMessages(accountId: string): Promise<Array<{ seq: number; lease: number; fence: boolean }>> {
  const jsm = await jetstreamManager(nc);
  const out: Array<{ seq: number; lease: number; fence: boolean }> = [];
  for (let at = 1; ;) {
    const m = await jsm.direct.getMessage(HISTORY_STREAM, { seq: at, next_by_subj: historySubject(accountId) });
    if (!m) return out;
    at = m.seq + 1;
    out.push({ seq: Number(m.header?.get('Tagw-Seq')), lease: Number(m.header?.get('Tagw-Lease') || 0), fence: !!m.header?.get('Tagw-Fence') });
  }
}

const ACCOUNT = new Set(['POSITIONS', 'ORDERS', 'TRADE']);
const numbered = (c: StreamClient): Frame[] => c.frames.filter((f) => ACCOUNT.has(f.type));
const text = (f: Frame) => JSON.stringify({ type: f.type, epoch: f.epoch, seq: f.seq, data: f.data });

describe('a dead owner\'s history publish stored after the takeover', () => {
  // 'before': the new owner's every history publish waits, its first (the takeover's) too, so the
  // dead owner's lands between the new owner's read of the head and its first write; 'after': the
  // new owner's first write passes and its frames wait, so the dead owner's lands after that write.
  it.each(['before', 'after'] as const)('landing %s the new owner\'s first write: every client gets each TRADE once, and a resume from JetStream replays, at each seq, the frame the live sockets got', async (when) => {
    const acct = await env.cluster.account();
    const { owner, others } = await env.cluster.roles(acct.id);
    const subject = historySubject(acct.id);
    const sockets = await Promise.all(others.map((id) => mustOpen(env.cluster.node(id).url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key })));
    const resumers: StreamClient[] = [];
    let releaseOwner = (): void => undefined;
    let releaseSuccessor = (): void => undefined;
    try {
      for (const s of sockets) await s.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the snapshot');
      const warm = await orderVia(env.cluster.node(owner), acct, 'warm');
      expect(warm.status, JSON.stringify(warm.body)).toBe(200);
      for (const s of sockets) await s.until((c) => c.of('TRADE').find((f) => f.data.order === warm.ticket), 15_000, 'the warm TRADE');
      const before = Math.max(...sockets.map((s) => numbered(s).at(-1)!.seq));
      const epoch = numbered(sockets[0]!).at(-1)!.epoch!;

      const ownerLease = (await env.cluster.lease(acct.id)).epoch;
      // The owner's history publishes from now on are held on their way (and all it sends after them).
      const ownerHeld = new Promise<void>((r) => { releaseOwner = r; });
      let ownerPublished = false;
      proxies.of(owner).watch((dir, chunk) => {
        if (dir !== 'up' || !chunk.toString('latin1').includes(`HPUB ${subject} `)) return undefined;
        ownerPublished = true;
        return { until: ownerHeld };
      });
      const ghost = await orderVia(env.cluster.node(owner), acct, 'ghost');
      expect(ghost.status, JSON.stringify(ghost.body)).toBe(200);
      await until(() => ownerPublished, 'the owner\'s publish of the order\'s frames');
      await new Promise((r) => setTimeout(r, 300)); // the order's other frames, behind it
      env.cluster.stop(owner);

      // The successor's history publishes wait until the owner's have been stored.
      const successorHeld = new Promise<void>((r) => { releaseSuccessor = r; });
      let successorPublished = false;
      for (const id of others) {
        proxies.of(id).watch((dir, chunk) => {
          const t = chunk.toString('latin1');
          if (dir !== 'up' || !t.includes(`HPUB ${subject} `)) return undefined;
          if (when === 'after' && t.includes('Tagw-Fence')) return undefined;
          successorPublished = true;
          return { until: successorHeld };
        });
      }
      await until(() => successorPublished, 'the new owner\'s first history publish', 20_000);
      releaseOwner();
      await until(async () => (await storedMessages(acct.id)).some((m) => m.seq > before), 'the dead owner\'s frames stored', 10_000);
      releaseSuccessor();
      for (const id of [owner, ...others]) proxies.of(id).watch(undefined);
      await env.cluster.kill(owner);

      const next = await retryingOrder(env.cluster, acct, 'next', []);
      expect(next.status, JSON.stringify(next.body)).toBe(200);
      for (const s of sockets) await s.until((c) => c.closed ?? c.of('TRADE').find((f) => f.data.order === next.ticket), 20_000, 'the next TRADE');

      // Every live socket: each TRADE once, in order (no socket was told to re-sync).
      for (const [i, s] of sockets.entries()) {
        expect(s.closed, others[i]).toBeNull();
        expect(s.of('TRADE').map((f) => f.data.order), others[i]).toEqual([warm.ticket, ghost.ticket, next.ticket]);
      }
      // A resume from before the order on the relaunched node (nothing of the account in its memory:
      // replayed from JetStream) gets, at each seq, the frame the live sockets got.
      await env.cluster.launch(owner);
      const r = await mustOpen(env.cluster.node(owner).url, { id: acct.id, heartbeat: '0', since: `${epoch}:${before}` }, { 'x-api-key': acct.key });
      resumers.push(r);
      const last = Math.max(...sockets.map((s) => numbered(s).at(-1)!.seq));
      await r.until((c) => c.closed ?? (numbered(c).at(-1)?.seq ?? 0) >= last, 20_000, `the replay up to seq ${last}`);
      expect(r.frames[0]).toMatchObject({ type: 'RESUMED', data: { recovered: true } });
      const replayed = new Map(numbered(r).map((f) => [f.seq, text(f)]));
      for (const [i, s] of sockets.entries()) {
        const live = numbered(s).filter((f) => f.seq > before && f.seq <= last);
        expect(live.map(text), others[i]).toEqual(live.map((f) => replayed.get(f.seq)));
      }
      expect(r.of('TRADE').map((f) => f.data.order)).toEqual([ghost.ticket, next.ticket]);

      // What happened in JetStream is what the case is about: the next owner's fence is refused for
      // the late write and written after it ('before'), or the late write is stored after the fence.
      const stored = await storedMessages(acct.id);
      const fence = stored.findIndex((m) => m.fence && m.lease > ownerLease);
      const trace = stored.map((m) => `${m.fence ? 'F' : ''}${m.seq}@${m.lease}`).join(' ');
      expect(fence, trace).toBeGreaterThan(-1);
      const lateAfterFence = stored.some((m, i) => i > fence && m.lease === ownerLease);
      if (when === 'before') expect(!lateAfterFence && stored[fence]!.seq > before, trace).toBe(true);
      else expect(lateAfterFence, trace).toBe(true);
    } finally {
      releaseOwner();
      releaseSuccessor();
      for (const id of [owner, ...others]) proxies.of(id).watch(undefined);
      if (env.cluster.node(owner).state === 'stopped') await env.cluster.kill(owner);
      if (env.cluster.node(owner).state === 'down') await env.cluster.launch(owner);
      await Promise.all([...sockets, ...resumers].map((s) => s.close()));
    }
  }, 150_000);
});
