// bench/cluster.ts's real-cluster quote figure: three gateway PROCESSES in cluster mode (the compiled
// build) on PostgreSQL leases, a simulator process, nats-server (test/helpers/clusterProcs.ts). The
// same ticks reach, in this process, a bare bridge-protocol subscriber of the simulator (the
// baseline: what any broker client gets) and /v1/stream sockets subscribed to the same symbols:
// - P5 server: an account's socket on its owner (`same`) and on another node that runs an account
//   of the same server (`near`: the near source, docs/cluster.md; the relay's copy comes too);
// - P4 server: its only account's socket on its owner (`same4`) and on a node with no account of
//   that server (`relay`: the owner's NATS relay alone, what the synthetic figures measure).
// Each quote's arrival at a socket minus its arrival at the bare subscriber is the gateway's added
// latency on that path (µs); the ratios compare the cross-node paths with their owner's socket.
// Arrivals are stamped in this one event loop (the client side costs every path alike).
import WebSocket from 'ws';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import type { Tick } from '../../src/market/server.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { ClusterProcs, startEngines, type ClusterAccount, type ClusterNode, type SimServer } from '../../test/helpers/clusterProcs.js';
import { cleanupProcesses } from '../../test/helpers/process.js';
import { Histogram } from './histogram.js';

type Path = 'same' | 'near' | 'same4' | 'relay';

export interface NearQuoteFigures {
  seconds: number;
  /** Quotes measured on each path (seen by the bare subscriber and the socket). */
  counts: Record<Path, number>;
  /** Added latency over the bare subscriber, µs. */
  addedUs: Record<Path, { p50: number; p99: number }>;
  /** near / same and relay / same4 of the added latency. */
  nearOverSame: { p50: number; p99: number };
  relayOverSame: { p50: number; p99: number };
  /** The near node's new quotes by where they came from during the run (tagw_stream_quotes_in_total). */
  nearNodeQuotesIn: { local: number; relay: number };
}

const key = (server: string, symbol: string, timeMsc: number, bid: number, ask: number) => `${server}|${symbol}|${timeMsc}|${bid}|${ask}`;

async function quotesIn(node: ClusterNode): Promise<{ local: number; relay: number }> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  const n = (path: string) => Number(new RegExp(`^tagw_stream_quotes_in_total\\{path="${path}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { local: n('local'), relay: n('relay') };
}

function openSocket(node: ClusterNode, acct: ClusterAccount, symbols: string[], onQuote: (k: string, at: number) => void): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${node.url.replace('http', 'ws')}/v1/stream?id=${acct.id}&heartbeat=0`, { headers: { 'x-api-key': acct.key } });
    let subscribed = 0;
    ws.on('message', (data) => {
      const at = performance.now();
      const f = JSON.parse(data.toString()) as { type: string; data: { symbol: string; bid: number; ask: number; timeMscUtc: number } };
      if (f.type === 'QUOTE') onQuote(key(acct.server, f.data.symbol, f.data.timeMscUtc, f.data.bid, f.data.ask), at);
      else if (f.type === 'SUBSCRIBED' && ++subscribed === symbols.length) resolve(ws);
      else if (f.type === 'ERROR') reject(new Error(`${node.id}: ${JSON.stringify(f.data)}`));
    });
    ws.on('error', reject);
    ws.on('open', () => {
      for (const symbol of symbols) ws.send(JSON.stringify({ action: 'subscribe', symbol }));
    });
    ws.on('unexpected-response', (_req, res) => reject(new Error(`${node.id}: /v1/stream answered ${res.statusCode}`)));
    ws.on('close', (code, reason) => reject(new Error(`${node.id}: /v1/stream closed ${code} ${reason.toString()}`)));
  });
}

export async function measureNearQuotes(opts: { seconds: number }): Promise<NearQuoteFigures> {
  const engines = await startEngines();
  let cluster: ClusterProcs | undefined;
  const closers: Array<() => unknown> = [];
  try {
    cluster = await ClusterProcs.start(engines, { nodes: 3 });
    const c = cluster;
    process.stderr.write('real cluster quotes: nodes up, making accounts\n');
    // P5 accounts until one node owns one and another node owns one too; one P4 account.
    const p5: Array<{ acct: ClusterAccount; owner: string }> = [];
    for (let i = 0; i < 9 && new Set(p5.map((x) => x.owner)).size < 2; i++) {
      const acct = await c.account();
      p5.push({ acct, owner: (await c.owner(acct.id)).owner });
    }
    const x = p5[0]!;
    const nearNode = c.node(p5.find((y) => y.owner !== x.owner)!.owner);
    const acct4 = await c.account('Sim-P4-Demo');
    const owner4 = c.node((await c.owner(acct4.id)).owner);
    // Not the near node, where it can be: its quotes by path (nearNodeQuotesIn) are then the near socket's alone.
    const relayNode = c.running().find((n) => n.id !== owner4.id && n.id !== nearNode.id) ?? c.running().find((n) => n.id !== owner4.id)!;

    const config = loadSimConfig();
    const symbolsOf = (server: SimServer) => config.servers.find((s) => s.name === server)!.symbols.map((s) => s.name);
    const arrivals = new Map<string, Partial<Record<Path | 'bare', number>>>();
    let measuring = false;
    const stamp = (path: Path | 'bare') => (k: string, at: number) => {
      if (!measuring) return;
      let a = arrivals.get(k);
      if (!a) arrivals.set(k, (a = {}));
      a[path] ??= at;
    };
    for (const [server, acct] of [['Sim-P5-Demo', x.acct], ['Sim-P4-Demo', acct4]] as const) {
      const bare = new BridgeBrokerConnection({ host: '127.0.0.1', port: c.sim.port, server, login: acct.login, password: 'pw', requestTimeoutMs: 10_000 });
      await bare.connect();
      closers.push(() => bare.disconnect());
      const onTick = stamp('bare');
      bare.on('tick', (t: Tick) => onTick(key(server, t.symbol, t.timeMsc, t.bid, t.ask), performance.now()));
      await bare.subscribe(symbolsOf(server));
    }
    const sockets: Array<[ClusterNode, ClusterAccount, Path]> = [
      [c.node(x.owner), x.acct, 'same'], [nearNode, x.acct, 'near'], [owner4, acct4, 'same4'], [relayNode, acct4, 'relay'],
    ];
    for (const [node, acct, path] of sockets) {
      process.stderr.write(`real cluster quotes: ${path} socket on ${node.id}\n`);
      const ws = await openSocket(node, acct, symbolsOf(acct.server), stamp(path));
      closers.push(() => ws.close());
    }
    // Warm-up: the paths' code compiled, the near source placed.
    await new Promise((r) => setTimeout(r, 3_000));
    const before = await quotesIn(nearNode);
    measuring = true;
    await new Promise((r) => setTimeout(r, opts.seconds * 1000));
    measuring = false;
    const after = await quotesIn(nearNode);
    const hist: Record<Path, Histogram> = { same: new Histogram(), near: new Histogram(), same4: new Histogram(), relay: new Histogram() };
    for (const a of arrivals.values()) {
      if (a.bare === undefined) continue;
      for (const path of Object.keys(hist) as Path[]) {
        const t = a[path];
        // A socket's frame before the bare subscriber's tick: the bare one was late in this loop; 0.
        if (t !== undefined) hist[path].record(Math.max(0, (t - a.bare) * 1000));
      }
    }
    const p = (h: Histogram) => ({ p50: h.percentile(50), p99: h.percentile(99) });
    const r = (a: number, b: number) => +(a / b).toFixed(2);
    const addedUs = { same: p(hist.same), near: p(hist.near), same4: p(hist.same4), relay: p(hist.relay) };
    return {
      seconds: opts.seconds,
      counts: { same: hist.same.count, near: hist.near.count, same4: hist.same4.count, relay: hist.relay.count },
      addedUs,
      nearOverSame: { p50: r(addedUs.near.p50, addedUs.same.p50), p99: r(addedUs.near.p99, addedUs.same.p99) },
      relayOverSame: { p50: r(addedUs.relay.p50, addedUs.same4.p50), p99: r(addedUs.relay.p99, addedUs.same4.p99) },
      nearNodeQuotesIn: { local: after.local - before.local, relay: after.relay - before.relay },
    };
  } finally {
    for (const close of closers) await Promise.resolve(close()).catch(() => undefined);
    await cluster?.close();
    cleanupProcesses();
    await engines.stop();
  }
}
