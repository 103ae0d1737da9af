// `npm run chaos` (CHAOS_MINUTES, default 10, 0 for one schedule; CHAOS_SEED to replay one): three gateway processes, a
// simulator process, nats-server and PostgreSQL of their own, and random fault schedules one after
// another (test/helpers/chaosSchedule.ts: SIGKILL, SIGSTOP past the lease, SIGTERM and relaunch of a
// node; nats-server restarted or frozen; PostgreSQL restarted; one at a time or two together) while idempotent clients trade on two
// fresh accounts per schedule, retrying each clientOrderId on the other nodes, and the SDK's stream
// of one of them follows through a round-robin balancer. After each schedule, once orders are
// accepted again: the checker over the whole history (every clientOrderId at most once at the
// broker, every 200 there), every final answer 200 or 409 IDEMPOTENCY_UNCERTAIN, every 503 a JSON
// error with retry-after, no request left without an answer until the client's timeout, and on the
// stream every accepted order's TRADE once (after a resync: those sent since). The issue's scenarios (test/integration/cluster-scenarios-*)
// each fix one fault; this draws their mixes. Not part of `npm test`: it runs for minutes.
import fc from 'fast-check';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { TagwClient } from '../../src/client/index.js';
import { describeStep, scheduleArb, type Fault, type Step } from '../helpers/chaosSchedule.js';
import { useCluster } from '../helpers/clusterProcs.js';
import { acceptableFinal, startTraffic, tally, unclean503 } from '../helpers/clusterTraffic.js';
import { assertLedger } from '../helpers/orderLedger.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

const MINUTES = Number(process.env.CHAOS_MINUTES ?? 10);
if (!(MINUTES >= 0)) throw new Error(`CHAOS_MINUTES=${process.env.CHAOS_MINUTES}: a number of minutes (0: one schedule)`);
const SEED = process.env.CHAOS_SEED === undefined ? undefined : Number(process.env.CHAOS_SEED);
const LEASE_MS = 1_500;
/** An attempt with no answer this long hung (orderVia gives up at 20 s). */
const HUNG_MS = 19_000;
const env = useCluster({ leaseMs: LEASE_MS, ownPostgres: true });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The longest interval between consecutive times (ms), 0 for fewer than two: from the traffic's
 *  start, through each accepted order's answer, to its stop, the longest an account went without one. */
const longestGap = (ts: number[]) => ts.sort((a, b) => a - b).reduce((m, t, i) => (i ? Math.max(m, t - ts[i - 1]!) : m), 0);

/** The load balancer the streams connect through: each connection to the next running node (one
 *  that went away meanwhile refuses it, and the client connects again). */
let balancer: TcpProxy | undefined;
afterAll(async () => balancer?.close());

async function balancerUrl(): Promise<string> {
  if (!balancer) {
    let next = 0;
    balancer = await startTcpProxy(env.cluster.nodes[0]!.port);
    balancer.target(() => {
      const live = env.cluster.running();
      return (live[next++ % Math.max(1, live.length)] ?? env.cluster.nodes[0]!).port;
    });
  }
  return balancer.url;
}

/** The time of day to the ms, for CHAOS_DEBUG's frame log. */
const now = () => new Date().toISOString().slice(11, 23);

/** The SDK's stream of an account through the balancer, from its first snapshot on: the TRADE of each
 *  order (the comment is its clientOrderId), and when it said continuity was lost (resync). */
async function watchTrades(acct: { id: string; key: string }) {
  const stream = new TagwClient({ baseUrl: await balancerUrl(), apiKey: acct.key, WebSocket }).stream(acct.id);
  const trades = new Map<string, number>();
  const resyncs: number[] = [];
  const errors: string[] = [];
  let snapshot = false;
  stream.on('POSITIONS', () => {
    snapshot = true;
  });
  stream.on('TRADE', (f) => trades.set(f.data.comment, (trades.get(f.data.comment) ?? 0) + 1));
  // For CHAOS_DEBUG: each frame's type and seq (a TRADE's order id too), and the socket's states.
  const frames: string[] = [];
  stream.on('*', (f) => frames.push(`${f.type}${'seq' in f && f.seq !== undefined ? `:${f.epoch ?? ''}:${f.seq}` : ''}${f.type === 'TRADE' ? `(${f.data.comment})` : ''}@${now()}`));
  stream.onEvent('state', (st, info) => frames.push(`[${st}${info?.code ? ` ${info.code}` : ''}]@${now()}`));
  stream.onEvent('resync', (r) => {
    resyncs.push(Date.now());
    frames.push(`RESYNC(${r.synthetic ? `sdk: ${r.reason ?? ''}` : 'recovered:false'})@${now()}`);
  });
  stream.onEvent('error', (e) => errors.push(e.message));
  await until(() => snapshot, 'the stream\'s first snapshot', 30_000);
  resyncs.length = 0;
  return { stream, trades, resyncs, errors, frames };
}

/** Starts a node again as a supervisor would: a start while PostgreSQL or NATS is away exits 1 by
 *  design (docs/cluster.md, Failures), and is tried again until it runs (30 s at most). */
async function relaunch(id: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await env.cluster.launch(id);
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(500);
    }
  }
}

async function carryOut(f: Fault): Promise<void> {
  const { cluster, engines } = env;
  const id = 'node' in f ? cluster.nodes[f.node]!.id : undefined;
  switch (f.kind) {
    case 'kill':
      await cluster.kill(id!);
      await sleep(f.downMs);
      await relaunch(id!);
      return;
    case 'freeze':
      cluster.stop(id!);
      await sleep(f.ms);
      cluster.cont(id!);
      return;
    case 'term':
      await cluster.term(id!);
      await relaunch(id!);
      return;
    case 'natsRestart':
      return engines.nats.restart();
    case 'natsFreeze':
      engines.nats.freeze();
      await sleep(f.ms);
      engines.nats.thaw();
      return;
    case 'pgRestart':
      return engines.pg.restart();
  }
}

describe('chaos', () => {
  it(`random fault schedules for ${MINUTES} min: nothing doubled, nothing answered 200 lost, only clean 503s, every schedule recovered from`, async () => {
    const totals = { schedules: 0, faults: 0, attempts: 0, orders: 0, accepted: 0, uncertain: 0, unavailable: 0, streamTrades: 0, streamReconnects: 0, streamResyncs: 0, longestStallMs: 0 };
    // One schedule per fast-check run, each under a seed of its own (printed first): the loop stops
    // starting schedules at the deadline and never leaves one running (fast-check's time limits
    // would abandon a running one, still faulting the cluster as it is torn down). A failure is
    // reported as drawn, not shrunk: each rerun costs tens of seconds on a cluster it may have left
    // in any state. CHAOS_SEED=<a schedule's seed> replays that schedule first.
    const firstSeed = SEED ?? Math.floor(Math.random() * 2 ** 31);
    const deadline = Date.now() + MINUTES * 60_000;
    for (let round = 1; round === 1 || Date.now() < deadline; round++) {
      const seed = firstSeed + round - 1;
      await fc.assert(fc.asyncProperty(scheduleArb(env.cluster.nodes.length, LEASE_MS), async (steps: Step[]) => {
        const ids = env.cluster.nodes.map((n) => n.id);
        console.log(`schedule ${round} (CHAOS_SEED=${seed}):\n  ${steps.map((s) => describeStep(s, ids)).join('\n  ')}`);
        const accounts = [await env.cluster.account(), await env.cluster.account()];
        const watched = await watchTrades(accounts[0]!);
        const started = Date.now();
        // ~4-5 orders a second per account: a schedule of five long steps (~45 s with its recovery)
        // stays under the ~300 0.01 BTCUSD buys a simulator account's margin holds (past it every
        // order is a 400 TRADE_REQUEST_ERROR, not a fault's doing).
        const traffic = accounts.map((a, i) => startTraffic(env.cluster, a, { tag: `r${round}-${i}`, clients: 2, pauseMs: 400 }));
        let stopped = 0;
        try {
          for (const s of steps) {
            await Promise.all([carryOut(s.fault), s.also ? sleep(s.alsoAfterMs ?? 0).then(() => carryOut(s.also!)) : undefined]);
            await sleep(s.pauseMs);
          }
          // Recovered by itself: orders sent from now on are accepted again on both accounts.
          const after = Date.now();
          await until(() => traffic.every((t) => t.log.some((a) => a.status === 200 && a.sentAt >= after)), `orders accepted again after schedule ${round}`, 60_000)
            .catch((err: Error) => {
              // What the clients got since (the message is made now, not when the wait began).
              throw new Error(`${err.message}; attempts since, per account: ${traffic.map((t) => tally(t.log.filter((a) => a.sentAt >= after)) || 'none answered').join(' | ')}`);
            });
        } finally {
          await Promise.all(traffic.map((t) => t.stop()));
          stopped = Date.now();
        }
        // CHAOS_DEBUG=1: every attempt (id@node:status, sent at, ms to the answer) and each node's log
        // in the temp directory (tagw-chaos-<node>.log): what found the lost reply of a NATS restart.
        if (process.env.CHAOS_DEBUG) {
          for (const n of env.cluster.nodes) writeFileSync(join(tmpdir(), `tagw-chaos-${n.id}.log`), n.proc.output());
          console.log(`stream frames: ${watched.frames.join(' ')}`);
          for (const t of traffic) console.log(t.log.map((x) => `${x.clientOrderId}@${x.node}:${x.status} ${new Date(x.sentAt).toISOString()}+${x.answeredAt - x.sentAt}`).join('\n'));
        }
        // The stream: every order accepted on the watched account delivered as one TRADE, once (the
        // SDK resumes across the faults); after a resync (continuity lost, snapshots follow) only the
        // orders first sent after it must be. First sent: an order retried after a 503 may have run at
        // its first attempt, before the resync (its later 200 a replay); its deal is then in the gap
        // the resync declared, and in the snapshots after it (the first runs counted its last attempt
        // and took that for a missing TRADE).
        const firstSent = new Map<string, number>();
        for (const a of traffic[0]!.log) firstSent.set(a.clientOrderId, Math.min(firstSent.get(a.clientOrderId) ?? Infinity, a.sentAt));
        const accepted = traffic[0]!.finals.filter((a) => a.status === 200);
        const owed = () => accepted.filter((a) => firstSent.get(a.clientOrderId)! > (watched.resyncs.at(-1) ?? 0) && !watched.trades.has(a.clientOrderId));
        try {
          await until(() => owed().length === 0 || watched.errors.length > 0, `schedule ${round}: the TRADEs of the accepted orders on the stream`, 30_000)
            .catch((err: Error) => {
              throw new Error(`${err.message} (missing: ${owed().map((a) => a.clientOrderId).slice(0, 5).join(', ')}; reconnects ${watched.stream.reconnects}, resyncs ${watched.resyncs.length})`);
            });
        } finally {
          watched.stream.close();
        }
        expect(watched.errors, `schedule ${round}: the stream ended`).toStrictEqual([]);
        expect([...watched.trades].filter(([, n]) => n > 1), `schedule ${round}: TRADEs delivered twice`).toStrictEqual([]);
        for (const [i, a] of accounts.entries()) {
          const t = traffic[i]!;
          // Each id at most once at the broker, every 200 there under its ticket, nothing no client sent.
          assertLedger(t.log, await env.cluster.brokerOrders(a.login));
          expect(t.finals.filter((x) => !acceptableFinal(x)), `schedule ${round}: final answers other than 200 or 409 IDEMPOTENCY_UNCERTAIN`).toStrictEqual([]);
          expect(t.log.map(unclean503).filter(Boolean), `schedule ${round}: unclean 503s`).toStrictEqual([]);
          // Every request answered (or its connection ended) before the client's 20 s timeout: a node
          // frozen by the schedule answers when it wakes (two leases at most); none may just hang.
          expect(t.log.filter((x) => x.status === 'refused' && x.answeredAt - x.sentAt >= HUNG_MS).map((x) => `${x.clientOrderId}@${x.node} ${new Date(x.sentAt).toISOString()}`),
            `schedule ${round}: requests that got no answer for ${HUNG_MS / 1000} s`).toStrictEqual([]);
        }
        const logs = traffic.flatMap((t) => t.log);
        const finals = traffic.flatMap((t) => t.finals);
        const sum = {
          schedule: round, seed, faults: steps.reduce((n, s) => n + (s.also ? 2 : 1), 0), attempts: logs.length, orders: finals.length, accepted: finals.filter((a) => a.status === 200).length,
          uncertain: finals.filter((a) => a.status === 409).length, unavailable: logs.filter((a) => a.status === 503 || a.status === 'refused').length,
          acceptedPerAccount: traffic.map((t) => t.finals.filter((x) => x.status === 200).length),
          // What the faults cost a client: the longest time an account went without an order accepted.
          longestStallMs: Math.max(...traffic.map((t) => longestGap([started, ...t.finals.filter((x) => x.status === 200).map((x) => x.answeredAt), stopped]))),
          streamTrades: watched.trades.size, streamReconnects: watched.stream.reconnects, streamResyncs: watched.resyncs.length,
        };
        totals.schedules++;
        for (const k of ['faults', 'attempts', 'orders', 'accepted', 'uncertain', 'unavailable', 'streamTrades', 'streamReconnects', 'streamResyncs'] as const) totals[k] += sum[k];
        totals.longestStallMs = Math.max(totals.longestStallMs, sum.longestStallMs);
        console.log(JSON.stringify(sum));
      }), { numRuns: 1, seed, endOnFailure: true });
    }
    console.log(JSON.stringify({ chaos: 'cluster', minutes: MINUTES, leaseMs: LEASE_MS, ...totals }));
    expect(totals.schedules).toBeGreaterThan(0);
  }, MINUTES * 60_000 + 300_000);
});
