// npm run bench -- cluster [--orders N] [--quotes N]
// Cluster mode's costs, against baselines in the same run (ratios; absolute numbers are load noise):
// - OrderSend through the AccountRouter: on the owner node (local shards) vs. from another node
//   (NATS request/reply to the owner, tagged JSON both ways). Two real gateways in bridge mode on one
//   simulator server, the other node in its own process, a real nats-server, leases in memory; the
//   two kinds alternate in blocks.
//   An empty NATS request/reply between the two nodes' processes is printed too: forwarding's floor.
// - A quote's path from a shard thread to a node's main thread (MessagePort, as shards post events)
//   vs. the same plus the relay to another node (publish on NATS, delivered to its onEvent). The
//   socket write after that is the same on either node and is not counted, so the end-to-end ratio
//   a client sees is closer to 1 than this one.
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { startNatsNode } from '../src/cluster/natsNode.js';
import type { OwnerInfo } from '../src/cluster/owners.js';
import type { AccountRouter } from '../src/cluster/router.js';
import { parseConfig } from '../src/config.js';
import { startGateway, type Gateway } from '../src/gateway.js';
import { createLogger } from '../src/log.js';
import type { ShardEvent } from '../src/runtime/protocol.js';
import { loadSimConfig } from '../src/sim/config.js';
import { Simulator } from '../src/sim/simulator.js';
import { startSimServer } from '../src/simServer.js';
import { MemorySimStore } from '../src/store/simStore.js';
import { startNats } from '../test/helpers/engines.js';
import { bindAccount } from '../test/helpers/trading.js';
import type { NodeCommand, NodeReply } from './lib/clusterNode.js';
import { Histogram } from './lib/histogram.js';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ORDERS = arg('orders', 1000);
const QUOTES = arg('quotes', 5000);
const BLOCK = 100;
const PER_ACCOUNT = 200; // a demo account's margin lasts a few hundred 0.01 BTCUSD positions
const MGMT = 'bench-management-key-0123456789abcdef';
const log = createLogger('silent');
const load = loadavg()[0];

const nats = await startNats();
const sim = new Simulator({ config: loadSimConfig(), store: new MemorySimStore() });
sim.start();
const bridge = await startSimServer(sim, { port: 0, host: '127.0.0.1' });
const dirs: string[] = [];
const gateway = async (): Promise<Gateway> => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-cluster-'));
  dirs.push(dataDir);
  return startGateway(parseConfig({
    host: '127.0.0.1', port: 0, dataDir, shards: 1, logLevel: 'silent', managementKey: MGMT,
    brokerMode: 'bridge', bridgeUrl: `tcp://127.0.0.1:${bridge.port}`,
  }), { log });
};
const gwA = await gateway();
// Node B in its own process (its own event loop, as on another machine): bench/lib/clusterNode.ts.
const child = fork(fileURLToPath(new URL('./lib/clusterNode.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
const ask = (m: NodeCommand) => new Promise<NodeReply>((resolve, reject) => {
  child.once('message', (r) => resolve(r as NodeReply));
  child.once('exit', (code) => reject(new Error(`node B exited ${code}`)));
  child.send(m);
});
await ask({ t: 'start', natsUrl: nats.url, bridgePort: bridge.port });

const leases = new Map<string, OwnerInfo>();
const sameNode = new Histogram();
const crossNode = new Histogram();
/** Quote sequence number (its bid) -> when the shard-like thread posted it. */
const sent = new Map<number, number>();
const node = (nodeId: string, onEvent: (ev: ShardEvent) => void) => startNatsNode({
  url: nats.url, nodeId, shards: gwA.services.shards, lookupOwner: async (a) => leases.get(a) ?? { owner: null, epoch: 0 }, ownerWaitMs: 5_000, onEvent, log,
});
const A = await node('A', () => {});
// The receiving end of the quote measure, in this process (one clock for both ends).
const Q = await node('quotes', (ev) => {
  if (ev.kind !== 'stream.tick') return;
  const t0 = sent.get(ev.data.tick.bid);
  if (t0 !== undefined) crossNode.record((performance.timeOrigin + performance.now() - t0) * 1000);
  sent.delete(ev.data.tick.bid);
});

// --- OrderSend: local vs forwarded -------------------------------------------------------------
const total = 2 * ORDERS + 4 * BLOCK;
const accounts: string[] = [];
for (let i = 0; i < Math.ceil(total / PER_ACCOUNT); i++) {
  const { id } = await bindAccount(`http://127.0.0.1:${gwA.port}`, MGMT, `bench${i}`);
  leases.set(id, { owner: 'A', epoch: 1 });
  A.owners.announce(id, { owner: 'A', epoch: 1 });
  accounts.push(id);
}
let seq = 0;
const send = async (router: AccountRouter, h: Histogram | null) => {
  const accountId = accounts[seq++ % accounts.length]!;
  const t0 = performance.now();
  const r = await router.call(accountId, 'account.trade', {
    accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: seq % 2 ? 'Sell' : 'Buy', volume: 0.01 },
  }, { retryOnRestart: false });
  h?.record((performance.now() - t0) * 1000);
  if (r.status !== 200) throw new Error(`order failed: ${r.json}`);
};
const remote = async (record: boolean) => {
  const r = await ask({ t: 'orders', accounts, n: BLOCK, record });
  if (r.t !== 'done') throw new Error('node B did not run the orders');
  return r;
};
for (let i = 0; i < BLOCK; i++) await send(A.router, null); // warm-up: JIT, connections, caches
await remote(false);
const local = new Histogram();
const forwarded = new Histogram();
let forwardedCount = 0;
for (let done = 0; done < ORDERS; done += BLOCK) {
  for (let i = 0; i < BLOCK; i++) await send(A.router, local);
  const r = await remote(true);
  forwarded.merge(r.hist);
  forwardedCount = r.forwarded;
  process.stderr.write(`orders: ${done + BLOCK}/${ORDERS} of each kind\r`);
}
process.stderr.write('\n');

// The floor under forwarding: an empty NATS request/reply from node B's process to node A's.
const echo = A.link.nc.subscribe('bench.echo', { callback: (_e, m) => void m.respond(m.data) });
await A.link.nc.flush();
await ask({ t: 'echo', subject: 'bench.echo', n: BLOCK });
const natsRtt = new Histogram();
const rtt = await ask({ t: 'echo', subject: 'bench.echo', n: ORDERS });
if (rtt.t === 'done') natsRtt.merge(rtt.hist);
echo.unsubscribe();

// --- Quotes: shard thread -> owner's main vs. -> owner's main -> NATS -> another node ---------------
await Q.relay.followMarket('Sim-P5-Demo', 'EURUSD');
// A shard-like thread posting one tick event per message, stamped on the shared high-resolution clock.
const worker = new Worker(`
  const { parentPort, workerData } = require('node:worker_threads');
  let i = 0;
  const timer = setInterval(() => {
    if (++i > workerData.n) { clearInterval(timer); parentPort.postMessage(null); return; }
    const ev = { kind: 'stream.tick', key: 'Sim-P5-Demo', data: { server: 'Sim-P5-Demo', tick: { symbol: 'EURUSD', bid: i, ask: i + 0.0002, timeMsc: i } } };
    parentPort.postMessage({ t0: performance.timeOrigin + performance.now(), batch: [ev] });
  }, 1);
`, { eval: true, workerData: { n: QUOTES + 500 } });
await new Promise<void>((resolve) => {
  worker.on('message', (m: { t0: number; batch: ShardEvent[] } | null) => {
    if (m === null) return resolve();
    for (const ev of m.batch) {
      if (ev.kind !== 'stream.tick') continue;
      const warm = ev.data.tick.bid <= 500;
      if (!warm) sameNode.record((performance.timeOrigin + performance.now() - m.t0) * 1000);
      if (!warm) sent.set(ev.data.tick.bid, m.t0);
      A.relay.publish(ev);
    }
  });
});
await new Promise((r) => setTimeout(r, 200)); // the last relayed ticks arrive
await worker.terminate();

const p = (h: Histogram) => ({ p50: h.percentile(50), p99: h.percentile(99) });
const ratio = (a: number, b: number) => +(a / b).toFixed(2);
console.log('local OrderSend    ', local.summary());
console.log('forwarded OrderSend', forwarded.summary());
console.log('NATS round trip    ', natsRtt.summary());
console.log('quote same node    ', sameNode.summary());
console.log('quote cross node   ', crossNode.summary());
console.log(JSON.stringify({
  bench: 'cluster', unit: 'us', load1m: +load!.toFixed(2), orders: ORDERS, quotes: crossNode.count,
  orderSend: { local: p(local), forwarded: p(forwarded) },
  forwardedOverLocalP50: ratio(forwarded.percentile(50), local.percentile(50)),
  forwardedOverLocalP99: ratio(forwarded.percentile(99), local.percentile(99)),
  natsRoundTrip: p(natsRtt),
  quote: { sameNode: p(sameNode), crossNode: p(crossNode) },
  quoteCrossOverSameP50: ratio(crossNode.percentile(50), sameNode.percentile(50)),
  quoteCrossOverSameP99: ratio(crossNode.percentile(99), sameNode.percentile(99)),
  forwarded: forwardedCount, served: A.router.stats.served,
}));

await A.close();
await Q.close();
await ask({ t: 'stop' }).catch(() => undefined);
await gwA.close();
await bridge.close();
await nats.stop();
for (const d of dirs) rmSync(d, { recursive: true, force: true });
process.exit(0);
