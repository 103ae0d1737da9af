// The quote part of bench/cluster.ts: a tick from a shard-like thread to a /v1/stream client socket,
// through the owner's hub (same node) vs. through the relay, nats-server and another node's hub
// (cross node). Ticks, one a millisecond, go round three symbols:
// - `alone`: one only a socket on the owner wants (its hub writes it; the relay does not publish it,
//   as a gateway's relay publishes only what other nodes want), one only a socket on node B wants
//   (the owner's hub has no socket for it; the relay publishes it). Each path runs by itself, and the
//   two alternate tick by tick, so they see the same machine state: what the cross path costs.
// - `shared`: one both sockets want, as a symbol followed on both nodes: each tick reaches both
//   sockets, latency compared tick by tick too. The owner's hub takes it first, and the relay
//   publishes it once uWS has written the hub's frame (the gateway's order, ownerOrder, while few
//   of the owner's sockets want the symbol): the cross path waits for that write, not the owner's
//   socket for the relay's (until the change, the other way round).
// `--quote-warmup` ticks first (volume -2: the clients skip them) for V8's compilers and the sockets,
// then `--quotes` measured ones (volume -1), a third of each. Each measured tick is stamped where it
// passes (the owner's main thread, node B's relay and hub, the client processes; all on the wall
// clock of performance.timeOrigin, within a few µs across processes), so the cross-node tail can be
// taken apart by step, and set beside the same-node tick just before each.
import { fork, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { PerformanceObserver } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { StreamRelay } from '../../src/cluster/streamRelay.js';
import { ownerOrder, type Gateway } from '../../src/gateway.js';
import type { StreamEvent } from '../../src/runtime/hosts/streamCommands.js';
import type { ShardEvent } from '../../src/runtime/protocol.js';
import { bindAccount } from '../../test/helpers/trading.js';
import type { ClientJob } from '../streamClient.js';
import { nowMs, StreamHist } from '../streamHist.js';
import type { NodeCommand, NodeReply } from './clusterNode.js';
import { loaderArgs, moduleBeside } from './launch.js';
import { SchedTally } from './procSched.js';

export interface QuoteBenchOptions {
  /** The owner: its gateway (hub) and its node's relay, in this process. */
  gateway: Gateway;
  relay: StreamRelay;
  managementKey: string;
  /** Node B (bench/lib/clusterNode.ts) in its own process. */
  ask: (m: NodeCommand) => Promise<NodeReply>;
  nodePid: number | undefined;
  natsPid: number | undefined;
  quotes: number;
  warmup: number;
  /** Consecutive windows the measured ticks are cut into, each with its own p99 ratio. */
  windows?: number;
}

const SERVER = 'Sim-P5-Demo';
/** Wanted by a socket on the owner only / on node B only / on both. */
const SAME = 'EURUSD';
const CROSS = 'GBPUSD';
const SHARED = 'USDJPY';
const SYMBOLS = [SAME, CROSS, SHARED];

/** One /v1/stream socket in a client process of the stream bench, subscribed to `symbols`. */
async function quoteClient(url: string, symbols: string[]): Promise<ChildProcess> {
  const file = moduleBeside('../streamClient.ts', import.meta.url);
  const c = fork(file, [], { execArgv: loaderArgs(file), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const job: ClientJob = { url, sockets: 1, symbols, mode: 'gateway', trace: true };
  await new Promise<void>((resolve, reject) => {
    c.once('message', (m: { t: string; message?: string }) => (m.t === 'ready' ? resolve() : reject(new Error(m.message))));
    c.send({ t: 'job', job });
  });
  return c;
}

/** [stamp, receipt] pairs of the client's measured frames. */
async function clientTrace(c: ChildProcess): Promise<number[]> {
  const r = await new Promise<{ trace?: number[] }>((resolve) => {
    c.once('message', (m: { trace?: number[] }) => resolve(m));
    c.send({ t: 'report' });
  });
  return r.trace ?? [];
}

async function streamUrl(base: string, managementKey: string, user: string): Promise<string> {
  const { key, id } = await bindAccount(base, managementKey, user);
  return `${base.replace(/^http/, 'ws')}/v1/stream?id=${id}&apiKey=${encodeURIComponent(key)}&heartbeat=0`;
}

const WORKER = `
  const { parentPort, workerData: w } = require('node:worker_threads');
  let i = 0;
  const timer = setInterval(() => {
    if (++i > w.warmup + w.n) { clearInterval(timer); parentPort.postMessage(null); return; }
    if (i === w.warmup + 1) parentPort.postMessage('measure');
    const tick = { symbol: w.symbols[i % 3], bid: 2000 + (i % 100) / 100, ask: 2000.5, timeMsc: performance.timeOrigin + performance.now(), volume: i > w.warmup ? -1 : -2 };
    parentPort.postMessage({ kind: 'stream.tick', key: w.server, data: { server: w.server, tick, source: 's0' } });
  }, 1);
`;

/** One measured tick's stamps (ms) along its paths. */
interface TickTrace {
  stamp: number;
  /** SAME, CROSS or SHARED. */
  symbol: string;
  /** Owner: the main thread got it; relay.publish returned (the tick written to nats-server: the
   *  turn's first market event is written at once; SHARED: in the immediate after uWS's writes);
   *  its hub is done (the frame handed to uWS, written
   *  when uWS drains its batch after the turn); the turn's microtasks ran (nats.js's write of
   *  anything it still held). */
  ownerIn: number; ownerRelay: number; ownerHub: number; ownerWritten: number;
  /** Node B (cross node): the relayed tick received and decoded; its hub is done (as the owner's). */
  nodeIn?: number; nodeHub?: number;
  /** The client processes' receipt. */
  sameRecv?: number; crossRecv?: number;
}
type SameTrace = TickTrace & { sameRecv: number };
type CrossTrace = TickTrace & { nodeIn: number; nodeHub: number; crossRecv: number };

const SAME_STEPS = {
  toOwner: (t: SameTrace) => t.ownerIn - t.stamp,
  ownerHub: (t: SameTrace) => t.ownerHub - t.ownerRelay,
  toClient: (t: SameTrace) => t.sameRecv - t.ownerHub,
};
const CROSS_STEPS = {
  toOwner: (t: CrossTrace) => t.ownerIn - t.stamp,
  /** encode, nats.js's publish and its write to nats-server. */
  relayPublish: (t: CrossTrace) => t.ownerRelay - t.ownerIn,
  /** Beside the hop, not on the cross path: the bytes left before it. */
  ownerHub: (t: CrossTrace) => t.ownerHub - t.ownerRelay,
  hop: (t: CrossTrace) => t.nodeIn - t.ownerRelay,
  nodeHub: (t: CrossTrace) => t.nodeHub - t.nodeIn,
  toClient: (t: CrossTrace) => t.crossRecv - t.nodeHub,
};

const us = (ms: number) => Math.round(ms * 1000);
function hist(values: Iterable<number>): StreamHist {
  const h = new StreamHist();
  for (const v of values) h.record(v);
  return h;
}
const pcts = (h: StreamHist) => ({ p50: h.percentile(50), p99: h.percentile(99), p999: h.percentile(99.9), max: h.max, n: h.count });
const ratio = (a: number, b: number) => +(a / b).toFixed(2);
const sameLatency = (t: SameTrace) => us(t.sameRecv - t.stamp);
const crossLatency = (t: CrossTrace) => us(t.crossRecv - t.stamp);
const mean = <T>(xs: T[], f: (t: T) => number) => Math.round(xs.reduce((s, t) => s + us(f(t)), 0) / (xs.length || 1));

/** Each step's p50 and p99 over all ticks, and its mean over the tail (the ticks at or past the
 *  path's p99) against its mean over all: where the tail's time went. */
function steps<T extends TickTrace>(all: T[], tail: T[], fs: Record<string, (t: T) => number>) {
  return Object.fromEntries(Object.entries(fs).map(([name, f]) => {
    const h = hist(all.map((t) => us(f(t))));
    return [name, { p50: h.percentile(50), p99: h.percentile(99), mean: mean(all, f), tailMean: mean(tail, f) }];
  }));
}

export async function measureQuotes(o: QuoteBenchOptions) {
  let started: NodeReply | undefined;
  for (const symbol of [CROSS, SHARED]) started = await o.ask({ t: 'quotes', server: SERVER, symbol });
  if (started?.t !== 'ready') throw new Error('node B did not follow the quotes');
  const clientA = await quoteClient(await streamUrl(`http://127.0.0.1:${o.gateway.port}`, o.managementKey, 'quotes-a'), [SAME, SHARED]);
  const clientB = await quoteClient(await streamUrl(started.url, o.managementKey, 'quotes-b'), [CROSS, SHARED]);
  clientA.send({ t: 'measure' });
  clientB.send({ t: 'measure' });
  // CPU and run-queue wait per measured tick of each process on the two paths.
  const sched = new SchedTally({ owner: process.pid, node: o.nodePid, nats: o.natsPid, sameClient: clientA.pid, crossClient: clientB.pid });
  let endSched = () => {};
  // [stamp, symbol (index in SYMBOLS), in, relay, hub, written] per measured tick.
  const owner: number[][] = [];
  // The owner process's GC pauses meanwhile: [start, duration] (ms), flattened.
  const ownerGc: number[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) ownerGc.push(performance.timeOrigin + e.startTime, e.duration);
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  const worker = new Worker(WORKER, { eval: true, workerData: { n: o.quotes, warmup: o.warmup, server: SERVER, symbols: SYMBOLS } });
  await new Promise<void>((resolve) => {
    worker.on('message', (ev: ShardEvent | 'measure' | null) => {
      if (ev === null) return resolve();
      if (ev === 'measure') {
        endSched = sched.start();
        return;
      }
      if (ev.kind !== 'stream.tick') return;
      // The gateway's order (ownerOrder): a symbol no socket here wants (CROSS) to the relay first,
      // written at once; one this node's socket wants too (SHARED) to the hub first, and to the
      // relay once uWS has written the hub's frame. The relay skips SAME, as a gateway's relay
      // skips what no other node wants.
      const tin = nowMs();
      const symbol = ev.data.tick.symbol;
      const rec = [ev.data.tick.timeMsc, SYMBOLS.indexOf(symbol), tin, tin, tin, 0];
      ownerOrder(ev, {
        dispatch: (e) => {
          o.gateway.stream.onShardEvent(e as StreamEvent);
          rec[4] = nowMs();
        },
        relay: (e) => {
          if (symbol !== SAME) o.relay.publish(e);
          rec[3] = nowMs();
        },
        relayAfterLocalWrites: (e) => {
          if (symbol === SAME) return;
          o.relay.publishAfterLocalWrites(e);
          setImmediate(() => { rec[3] = nowMs(); }); // right after the relay's own immediate
        },
        localSockets: (e) => o.gateway.stream.localSockets(e),
      });
      if (ev.data.tick.volume !== -1) return;
      owner.push(rec);
      queueMicrotask(() => { rec[5] = nowMs(); }); // after nats.js's own microtask, had it any write left
    });
  });
  await new Promise((r) => setTimeout(r, 300)); // the last relayed ticks arrive
  endSched();
  gcObserver.disconnect();
  await worker.terminate();
  const [same, cross, node] = await Promise.all([clientTrace(clientA), clientTrace(clientB), o.ask({ t: 'quoteTrace' })]);
  for (const c of [clientA, clientB]) c.send({ t: 'close' });
  const nodeTrace = node.t === 'trace' ? node : { data: [], gc: [] };
  return analyse(o, { owner, same, cross, node: nodeTrace.data, ownerGc, nodeGc: nodeTrace.gc }, sched);
}

/** p50/p99/p99.9 of each path, their ratios, and the p99 ratio of each window of consecutive ticks
 *  (how much it moves within one run). */
function compare(o: QuoteBenchOptions, same: SameTrace[], cross: CrossTrace[]) {
  const sameH = hist(same.map(sameLatency));
  const crossH = hist(cross.map(crossLatency));
  const k = o.windows ?? 4;
  const part = <T>(xs: T[], w: number) => xs.slice(Math.floor((w * xs.length) / k), Math.floor(((w + 1) * xs.length) / k));
  const windowsP99: number[] = [];
  for (let w = 0; w < k; w++) windowsP99.push(ratio(hist(part(cross, w).map(crossLatency)).percentile(99), hist(part(same, w).map(sameLatency)).percentile(99)));
  return {
    sameNode: pcts(sameH),
    crossNode: pcts(crossH),
    crossOverSame: {
      p50: ratio(crossH.percentile(50), sameH.percentile(50)),
      p99: ratio(crossH.percentile(99), sameH.percentile(99)),
      p999: ratio(crossH.percentile(99.9), sameH.percentile(99.9)),
    },
    windowsP99,
  };
}

interface Traces { owner: number[][]; same: number[]; cross: number[]; node: number[]; ownerGc: number[]; nodeGc: number[] }

/** GC pauses as [start, end] (ms), and whether one overlaps [from, to]. */
function pauses(flat: number[]) {
  const list: [number, number][] = [];
  for (let i = 0; i < flat.length; i += 2) list.push([flat[i]!, flat[i]! + flat[i + 1]!]);
  return {
    overlaps: (from: number, to: number) => list.some(([a, b]) => a < to && b > from),
    summary: { n: list.length, totalMs: +list.reduce((s, [a, b]) => s + b - a, 0).toFixed(1), maxMs: +Math.max(0, ...list.map(([a, b]) => b - a)).toFixed(2) },
  };
}

function analyse(o: QuoteBenchOptions, { owner, same, cross, node, ownerGc, nodeGc }: Traces, sched: SchedTally) {
  const ticks = new Map<number, TickTrace>();
  for (const [stamp, symbol, ownerIn, ownerRelay, ownerHub, ownerWritten] of owner) {
    ticks.set(stamp!, { stamp: stamp!, symbol: SYMBOLS[symbol!]!, ownerIn: ownerIn!, ownerRelay: ownerRelay!, ownerHub: ownerHub!, ownerWritten: ownerWritten! });
  }
  const at = (stamp: number) => ticks.get(stamp) ?? ({} as Partial<TickTrace>);
  for (let i = 0; i < node.length; i += 3) Object.assign(at(node[i]!), { nodeIn: node[i + 1], nodeHub: node[i + 2] });
  for (let i = 0; i < same.length; i += 2) at(same[i]!).sameRecv = same[i + 1];
  for (let i = 0; i < cross.length; i += 2) at(cross[i]!).crossRecv = cross[i + 1];
  const byStamp = [...ticks.values()].sort((a, b) => a.stamp - b.stamp);
  // Every tick's stamps, for a closer look (steps of the slowest ticks, stalls in time).
  if (process.env.CLUSTER_QUOTES_DUMP) writeFileSync(process.env.CLUSTER_QUOTES_DUMP, JSON.stringify(byStamp));
  const reachedSame = (t: TickTrace): t is SameTrace => t.sameRecv !== undefined;
  const reachedCross = (t: TickTrace): t is CrossTrace => t.crossRecv !== undefined && t.nodeIn !== undefined && t.nodeHub !== undefined;
  const sameAlone = byStamp.filter((t) => t.symbol === SAME).filter(reachedSame);
  const crossAlone = byStamp.filter((t) => t.symbol === CROSS).filter(reachedCross);
  const shared = byStamp.filter((t): t is SameTrace & CrossTrace => t.symbol === SHARED && reachedSame(t) && reachedCross(t));
  const incomplete = byStamp.length - sameAlone.length - crossAlone.length - shared.length;
  // The alone cross-node tail (ticks at or past its p99) and the same-node tick just before each
  // (2-3 ms earlier): a stall both paths saw, or the cross path's own?
  const crossP99 = hist(crossAlone.map(crossLatency)).percentile(99);
  const sameP99 = hist(sameAlone.map(sameLatency)).percentile(99);
  const crossTail = crossAlone.filter((t) => crossLatency(t) >= crossP99);
  const sameTail = sameAlone.filter((t) => sameLatency(t) >= sameP99);
  const sameBefore = new Map<number, SameTrace>();
  let last: SameTrace | undefined;
  for (const t of byStamp) {
    if (t.symbol === SAME && reachedSame(t)) last = t;
    else if (t.symbol === CROSS && last) sameBefore.set(t.stamp, last);
  }
  const neighbours = crossTail.map((t) => sameBefore.get(t.stamp)).filter((t): t is SameTrace => t !== undefined);
  const paired = hist(shared.map((t) => us(t.crossRecv - t.sameRecv)));
  const gcOwner = pauses(ownerGc);
  const gcNode = pauses(nodeGc);
  return {
    quotes: byStamp.length,
    incomplete,
    /** Each path by itself, alternating: what the cross path adds. */
    alone: compare(o, sameAlone, crossAlone),
    /** A symbol both nodes' sockets want: the same ticks to both. `crossMinusSame`: per tick, µs. */
    shared: { ...compare(o, shared, shared), crossMinusSame: { p50: paired.percentile(50), p99: paired.percentile(99) } },
    /** µs per step of each path by itself (TickTrace), over all its ticks and over its tail. */
    steps: { sameNode: steps(sameAlone, sameTail, SAME_STEPS), crossNode: steps(crossAlone, crossTail, CROSS_STEPS) },
    /** The alone cross-node tail: its ticks' mean latency, and the same-node ticks just before them:
     *  their mean, and how many were past the same-node p99 too. */
    crossTail: {
      n: crossTail.length, mean: mean(crossTail, (t) => t.crossRecv - t.stamp),
      sameBeforeMean: mean(neighbours, (t) => t.sameRecv - t.stamp), sameBeforeInTail: neighbours.filter((t) => sameLatency(t) >= sameP99).length,
      /** Tail ticks with a GC pause of the owner while it had them (stamp to written), of node B
       *  while they were on the way to it or in it (written to hub done). */
      duringOwnerGc: crossTail.filter((t) => gcOwner.overlaps(t.stamp, t.ownerWritten)).length,
      duringNodeGc: crossTail.filter((t) => gcNode.overlaps(t.ownerWritten, t.nodeHub)).length,
    },
    gc: { owner: gcOwner.summary, node: gcNode.summary },
    perTickUs: sched.perUnit(byStamp.length),
  };
}
