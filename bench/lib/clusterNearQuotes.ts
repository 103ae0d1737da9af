// bench/cluster.ts's real-cluster quote figure: three gateway PROCESSES in cluster mode (the compiled
// build) on PostgreSQL leases, a simulator process, nats-server (test/helpers/clusterProcs.ts). The
// same ticks reach, in this process, a bare bridge-protocol subscriber of the simulator (the
// baseline: what any broker client gets) and /v1/stream sockets subscribed to the same symbols:
// - P5 server: an account's socket on its owner (`same`) and on another node that runs an account
//   of the same server (`near`: the near source, docs/cluster.md; the relay's copy comes too);
// - P4 server: its only account's socket on its owner (`same4`), on a node with no account of that
//   server and no quote login (`relay`: the owner's NATS relay alone, what the synthetic figures
//   measure), and on a node with no account of it but a quote login for it (`quote`: its quote
//   session, docs/cluster.md "Quote sessions"; node c, QUOTE_LOGINS_FILE naming Sim-P4-Demo).
// Each quote's arrival at a socket minus its arrival at the bare subscriber is the gateway's added
// latency on that path (µs); the ratios compare the cross-node paths with their owner's socket.
// Arrivals are stamped in this one event loop (the client side costs every path alike).
// The two sides in alternating blocks (bench/lib/pairedBlocks.ts, ABBA): the owner's sockets (same,
// same4) open alone, then the other nodes' alone: near and relay (as before quote sessions), and, in
// pairs of their own, quote beside same (the P5 side as in the base block; not beside relay: with a
// socket on the relay node following P4 too, the owner could not withhold the quote node's copies),
// each block's sockets opened afresh and let settle
// before it is measured (a quote session logs in when its block's socket subscribes, and closes
// with it); a ratio per pair of blocks and one over the pooled blocks.
// Each server's symbols `copies` times over (EURUSD, EURUSD_2, ...; the simulator's own tick rates,
// 28 a second on P5, 25 on P4, before the copies), all followed by every socket: more quotes a
// second rather than longer runs.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import type { Tick } from '../../src/market/server.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { ClusterProcs, startEngines, type ClusterAccount, type ClusterNode, type SimServer } from '../../test/helpers/clusterProcs.js';
import { cleanupProcesses } from '../../test/helpers/process.js';
import { Histogram } from './histogram.js';
import { blockOf, pairedComparison, runPair } from './pairedBlocks.js';

type Path = 'same' | 'near' | 'same4' | 'relay' | 'quote';

type Paired = Omit<ReturnType<typeof pairedComparison>, 'tail'>;

export interface NearQuoteFigures {
  /** Seconds measured of each side (its blocks together), in `pairs` pairs of blocks. */
  seconds: number;
  pairs: number;
  /** Symbols each socket follows on P5 and P4 (the servers' own, `copies` times). */
  symbols: { p5: number; p4: number; copies: number };
  /** Quotes measured on each path (seen by the bare subscriber and the socket), all blocks. */
  counts: Record<Path, number>;
  /** Added latency over the bare subscriber, µs, pooled over the path's blocks. */
  addedUs: Record<Path, { p50: number; p99: number }>;
  /** near / same and relay / same4 of the pooled added latency. */
  nearOverSame: { p50: number; p99: number };
  relayOverSame: { p50: number; p99: number };
  /** quote / same4: the quote session's socket over the owner's. */
  quoteOverSame: { p50: number; p99: number };
  /** The same pair by pair (base: same or same4, other: near, relay or quote), with the ratios' min,
   *  median and max over the pairs and the pooled summaries with n (pairedComparison). */
  paired: { nearOverSame: Paired; relayOverSame: Paired; quoteOverSame: Paired };
  /** The near node's new quotes by where they came from during its blocks (tagw_stream_quotes_in_total). */
  nearNodeQuotesIn: { local: number; relay: number };
  /** The same of the quote node (its quote session's: local), during the blocks of its socket;
   *  `sameNode` when the P5 socket beside it (same) is on that node too (the two sockets' then). */
  quoteNodeQuotesIn: { local: number; relay: number; sameNode: boolean };
}

/** Each server's symbols `copies` times over: the originals, then NAME_2 ... NAME_copies. */
export function withSymbolCopies<S extends { name: string; symbols: Array<{ name: string }> }>(servers: S[], copies: number): void {
  for (const server of servers) {
    const own = server.symbols;
    server.symbols = [...own];
    for (let k = 2; k <= copies; k++) server.symbols.push(...own.map((sym) => ({ ...sym, name: `${sym.name}_${k}` })));
  }
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

export async function measureNearQuotes(opts: { seconds: number; pairs: number; copies: number }): Promise<NearQuoteFigures> {
  const engines = await startEngines();
  let cluster: ClusterProcs | undefined;
  const closers: Array<() => unknown> = [];
  try {
    // Market hours always: the forex symbols (and their copies) tick on a weekend too (they stopped
    // from Friday 21:55 UTC to Sunday 22:00 UTC, and only BTCUSD's copies were measured).
    // Node c has a market-data login for P4 (the simulator makes the login at its first connect).
    const quoteFile = join(mkdtempSync(join(tmpdir(), 'tagw-bench-quote-logins-')), 'quote-logins.json');
    writeFileSync(quoteFile, JSON.stringify({ 'Sim-P4-Demo': { login: 'bench-feed4', password: 'feed-pw' } }), { mode: 0o600 });
    cluster = await ClusterProcs.start(engines, {
      nodes: 3, simMarketHours: 'always', simServers: (config) => withSymbolCopies(config.servers, opts.copies),
      nodeEnv: (id): Record<string, string> => (id.endsWith('-c') ? { QUOTE_LOGINS_FILE: quoteFile } : {}),
    });
    const c = cluster;
    process.stderr.write('real cluster quotes: nodes up, making accounts\n');
    // P5 accounts until one node owns one and another node owns one too; one P4 account.
    const p5: Array<{ acct: ClusterAccount; owner: string }> = [];
    for (let i = 0; i < 9 && new Set(p5.map((x) => x.owner)).size < 2; i++) {
      const acct = await c.account();
      p5.push({ acct, owner: (await c.owner(acct.id)).owner });
    }
    const x = p5[0]!;
    const quoteNode = c.running().find((n) => n.id.endsWith('-c'))!;
    // Not the quote node, where it can be: its quotes by path (nearNodeQuotesIn) are then the near socket's alone.
    const others = p5.filter((y) => y.owner !== x.owner);
    const nearNode = c.node((others.find((y) => y.owner !== quoteNode.id) ?? others[0]!).owner);
    // One P4 account, not on the quote node (which must run none: its quote session serves P4
    // there). Accounts go to nodes with room (at most ceil(N / 3) each): P5 ones first until the
    // quote node has none left for the next account.
    const held = (id: string) => p5.filter((y) => y.owner === id).length;
    for (let i = 0; i < 8 && held(quoteNode.id) < Math.ceil((p5.length + 1) / 3); i++) {
      const acct = await c.account();
      p5.push({ acct, owner: (await c.owner(acct.id)).owner });
    }
    const acct4 = await c.account('Sim-P4-Demo');
    if ((await c.owner(acct4.id)).owner === quoteNode.id) throw new Error('the P4 account went to the quote node');
    const owner4 = c.node((await c.owner(acct4.id)).owner);
    const relayNode = c.running().find((n) => n.id !== owner4.id && n.id !== quoteNode.id)!;

    const config = loadSimConfig();
    withSymbolCopies(config.servers, opts.copies);
    const symbolsOf = (server: SimServer) => config.servers.find((s) => s.name === server)!.symbols.map((s) => s.name);
    const arrivals = new Map<string, Partial<Record<Path | 'bare', number>>>();
    // 'measure': every arrival stamped; 'grace' (after a block): the sockets' late arrivals of quotes
    // the bare subscriber had in the block, no new ones.
    let phase: 'off' | 'measure' | 'grace' = 'off';
    const stamp = (path: Path | 'bare') => (k: string, at: number) => {
      if (phase === 'off' || (phase === 'grace' && path === 'bare')) return;
      let a = arrivals.get(k);
      if (!a) {
        if (phase === 'grace') return;
        arrivals.set(k, (a = {}));
      }
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
    const sockets: Record<Path, [ClusterNode, ClusterAccount]> = {
      same: [c.node(x.owner), x.acct], near: [nearNode, x.acct], same4: [owner4, acct4], relay: [relayNode, acct4], quote: [quoteNode, acct4],
    };
    const open = async (paths: Path[]) => Promise.all(paths.map((path) => openSocket(sockets[path][0], sockets[path][1], symbolsOf(sockets[path][1].server), stamp(path))));
    const close = async (list: WebSocket[]) => Promise.all(list.map((ws) => new Promise<void>((resolve) => {
      ws.removeAllListeners('close');
      ws.once('close', () => resolve());
      ws.close();
    })));
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // Warm-up: all four sockets, the paths' code compiled.
    process.stderr.write(`real cluster quotes: ${symbolsOf('Sim-P5-Demo').length} symbols on P5, ${symbolsOf('Sim-P4-Demo').length} on P4; warm-up\n`);
    const all = await open(['same', 'near', 'same4', 'relay', 'quote']);
    await sleep(3_000);
    await close(all);
    const BASE: Path[] = ['same', 'same4'];
    // The quote socket beside the owner's P5 socket (`same`), as in its base block: the P5 side of
    // both blocks is then the same sockets on the same nodes. With `near` beside it (before
    // 2026-11-28 05:30), the simulator, which writes a step's ticks of P5 before those of P4, woke the
    // near node's shard too before it wrote the quote session's ticks: one more process ahead of
    // the quote path on the host's CPUs than ahead of same4's, ~100 µs more at the shard's receipt
    // and at its main thread's (docs/cluster-performance.md, 2026-11-28 05:04).
    const OTHER: Path[] = ['same', 'quote'];
    // The near socket beside the relay's: each block of that side has one P5 and one P4 socket (the
    // same load), the set the runs before 2026-11-28 measured.
    const RELAY: Path[] = ['near', 'relay'];
    const blockMs = (opts.seconds * 1000) / opts.pairs;
    const nearIn = { local: 0, relay: 0 };
    const quoteIn = { local: 0, relay: 0, sameNode: OTHER.some((p) => p !== 'quote' && sockets[p][0].id === quoteNode.id) };
    /** One block of `paths`' sockets: opened, settled (the near source placed, the relay's interest
     *  known), measured, closed; each path's added latency. */
    const block = async (paths: Path[]) => {
      const ws = await open(paths);
      await sleep(1_000);
      const before = paths.includes('near') ? await quotesIn(nearNode) : undefined;
      const beforeQ = paths.includes('quote') ? await quotesIn(quoteNode) : undefined;
      arrivals.clear();
      phase = 'measure';
      await sleep(blockMs);
      phase = 'grace';
      const after = before ? await quotesIn(nearNode) : undefined;
      const afterQ = beforeQ ? await quotesIn(quoteNode) : undefined;
      await sleep(500);
      phase = 'off';
      await close(ws);
      if (beforeQ && afterQ) {
        quoteIn.local += afterQ.local - beforeQ.local;
        quoteIn.relay += afterQ.relay - beforeQ.relay;
      }
      if (before && after) {
        nearIn.local += after.local - before.local;
        nearIn.relay += after.relay - before.relay;
      }
      const hist = Object.fromEntries(paths.map((p) => [p, new Histogram()])) as Partial<Record<Path, Histogram>>;
      for (const a of arrivals.values()) {
        if (a.bare === undefined) continue;
        for (const path of paths) {
          const t = a[path];
          // A socket's frame before the bare subscriber's tick: the bare one was late in this loop; 0.
          if (t !== undefined) hist[path]!.record(Math.max(0, (t - a.bare) * 1000));
        }
      }
      return hist;
    };
    type Pair = { base: Partial<Record<Path, Histogram>>; other: Partial<Record<Path, Histogram>> };
    const pairs: Pair[] = [];
    const relayPairs: Pair[] = [];
    for (let i = 0; i < opts.pairs; i++) {
      process.stderr.write(`real cluster quotes: pair ${i + 1}/${opts.pairs}\r`);
      pairs.push(await runPair(i, () => block(BASE), () => block(OTHER)));
      relayPairs.push(await runPair(i, () => block(BASE), () => block(RELAY)));
    }
    process.stderr.write('\n');
    const compare = (base: Path, other: Path, of = pairs) => {
      const { tail: _tail, ...r } = pairedComparison(of.map((p) => ({ base: blockOf(p.base[base]!), other: blockOf(p.other[other]!) })));
      return r;
    };
    const nearOverSame = compare('same', 'near', relayPairs);
    const quoteOverSame = compare('same4', 'quote');
    const relayOverSame = compare('same4', 'relay', relayPairs);
    const pooled = {
      same: nearOverSame.pooled.baseUs, near: nearOverSame.pooled.otherUs, same4: quoteOverSame.pooled.baseUs, quote: quoteOverSame.pooled.otherUs,
      relay: relayOverSame.pooled.otherUs,
    };
    const p = (s: { p50: number; p99: number }) => ({ p50: s.p50, p99: s.p99 });
    return {
      seconds: opts.seconds,
      pairs: opts.pairs,
      symbols: { p5: symbolsOf('Sim-P5-Demo').length, p4: symbolsOf('Sim-P4-Demo').length, copies: opts.copies },
      counts: { same: pooled.same.n, near: pooled.near.n, same4: pooled.same4.n, relay: pooled.relay.n, quote: pooled.quote.n },
      addedUs: { same: p(pooled.same), near: p(pooled.near), same4: p(pooled.same4), relay: p(pooled.relay), quote: p(pooled.quote) },
      nearOverSame: nearOverSame.pooled.otherOverBase,
      relayOverSame: relayOverSame.pooled.otherOverBase,
      quoteOverSame: quoteOverSame.pooled.otherOverBase,
      paired: { nearOverSame, relayOverSame, quoteOverSame },
      nearNodeQuotesIn: nearIn,
      quoteNodeQuotesIn: quoteIn,
    };
  } finally {
    for (const close of closers) await Promise.resolve(close()).catch(() => undefined);
    await cluster?.close();
    cleanupProcesses();
    await engines.stop();
  }
}
