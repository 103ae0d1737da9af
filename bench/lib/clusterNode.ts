// A second cluster node for bench/cluster.ts, in its own process (its own event loop, as on another
// machine): a real gateway in bridge mode and an AccountRouter that finds every account owned by
// node "A" (the parent). On {t:'orders'} it sends OrderSends through its router (forwarded to A)
// and answers with their latency histogram; on {t:'echo'} it times empty NATS requests to the parent
// (through a ReplyInbox, as the router sends its calls: forwarding's floor); on {t:'ping'} empty round
// trips over a plain TCP socket to the parent (no broker between: what a direct transport would
// cost); it answers the parent's empty requests on `bench.echo.B` (before each of the parent's
// "local after idle" orders); on {t:'quotes'} it follows a symbol's market data, which its gateway's hub then fans out,
// stamping each of the bench's measured ticks as it arrives and once its hub is done, and its GC
// pauses meanwhile ({t:'quoteTrace'} sends them).
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { join } from 'node:path';
import type { NatsLink } from '../../src/cluster/natsLink.js';
import { startNatsNode } from '../../src/cluster/natsNode.js';
import { ReplyInbox } from '../../src/cluster/replyInbox.js';
import type { StreamRelay } from '../../src/cluster/streamRelay.js';
import type { AccountRouter } from '../../src/cluster/router.js';
import { parseConfig } from '../../src/config.js';
import { startGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/log.js';
import { Histogram } from './histogram.js';

export type NodeCommand =
  | { t: 'start'; natsUrl: string; bridgePort: number; managementKey: string }
  | { t: 'orders'; accounts: string[]; n: number; record: boolean }
  | { t: 'echo'; subject: string; n: number }
  | { t: 'ping'; port: number; n: number }
  | { t: 'quotes'; server: string; symbol: string }
  | { t: 'quoteTrace' }
  | { t: 'stop' };
export type NodeReply =
  | { t: 'ready'; url: string }
  | { t: 'done'; hist: ReturnType<Histogram['toJSON']>; forwarded: number }
  | { t: 'trace'; data: number[]; gc: number[] };

const log = createLogger('silent');
const send = (m: NodeReply) => process.send!(m);
let seq = 0;
/** [tick stamp, relayed tick received (decoded), hub done] of each measured tick (volume -1), flattened, in ms. */
let quoteTrace: number[] = [];
/** [start, duration] of each GC pause while quotes flow, flattened, in ms. */
let gcTrace: number[] = [];
const gcObserver = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcTrace.push(performance.timeOrigin + e.startTime, e.duration);
});
const nowMs = () => performance.timeOrigin + performance.now();
let node: { router: AccountRouter; link: NatsLink; relay: StreamRelay; url: string; close(): Promise<void> } | undefined;
let inbox: ReplyInbox | undefined;
let pinger: { socket: Socket; ping(): Promise<void> } | undefined;

/** A TCP connection to the parent's echo server; ping() sends 2 bytes and waits for them back. */
async function tcpPinger(port: number): Promise<{ socket: Socket; ping(): Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let waiting: (() => void) | null = null;
  let got = 0;
  socket.on('data', (d) => {
    got += d.length;
    if (got >= 2 && waiting) {
      got -= 2;
      const w = waiting;
      waiting = null;
      w();
    }
  });
  const bytes = Buffer.from('{}');
  return { socket, ping: () => new Promise<void>((resolve) => { waiting = resolve; socket.write(bytes); }) };
}

process.on('message', (m: NodeCommand) => void (async () => {
  if (m.t === 'start') {
    const dataDir = mkdtempSync(join(tmpdir(), 'tagw-bench-node-'));
    const gw = await startGateway(parseConfig({
      host: '127.0.0.1', port: 0, dataDir, shards: 1, logLevel: 'silent', brokerMode: 'bridge', managementKey: m.managementKey, bridgeUrl: `tcp://127.0.0.1:${m.bridgePort}`,
    }), { log });
    const nats = await startNatsNode({
      url: m.natsUrl, nodeId: 'B', shards: gw.services.shards, lookupOwner: async () => ({ owner: 'A', epoch: 1 }), ownerWaitMs: 5_000, log,
      // Market data relayed from the owner goes to this gateway's hub, as its own shards' would.
      onEvent: (ev) => {
        if (ev.kind !== 'stream.tick' && ev.kind !== 'stream.candle') return;
        const t0 = nowMs();
        gw.stream.onShardEvent(ev);
        if (ev.kind === 'stream.tick' && ev.data.tick.volume === -1) quoteTrace.push(ev.data.tick.timeMsc, t0, nowMs());
      },
    });
    // The owner's empty round trips before its "local after idle" orders (bench/cluster.ts) come here.
    nats.link.nc.subscribe('bench.echo.B', { callback: (_e, msg) => void msg.respond(msg.data) });
    node = {
      router: nats.router, link: nats.link, relay: nats.relay, url: `http://127.0.0.1:${gw.port}`,
      async close() {
        await nats.close();
        await gw.close();
        rmSync(dataDir, { recursive: true, force: true });
      },
    };
    send({ t: 'ready', url: node.url });
  } else if (m.t === 'orders') {
    const h = new Histogram();
    for (let i = 0; i < m.n; i++) {
      const accountId = m.accounts[seq++ % m.accounts.length]!;
      const t0 = performance.now();
      const r = await node!.router.call(accountId, 'account.trade', {
        accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: seq % 2 ? 'Sell' : 'Buy', volume: 0.01 },
      }, { retryOnRestart: false });
      if (m.record) h.record((performance.now() - t0) * 1000);
      if (r.status !== 200) throw new Error(`order failed: ${r.json}`);
    }
    send({ t: 'done', hist: h.toJSON(), forwarded: node!.router.stats.forwarded });
  } else if (m.t === 'quotes') {
    quoteTrace = [];
    gcTrace = [];
    gcObserver.observe({ entryTypes: ['gc'] });
    await node!.relay.followMarket(m.server, m.symbol);
    send({ t: 'ready', url: node!.url });
  } else if (m.t === 'quoteTrace') {
    gcObserver.disconnect();
    send({ t: 'trace', data: quoteTrace, gc: gcTrace });
  } else if (m.t === 'echo') {
    const h = new Histogram();
    inbox ??= new ReplyInbox(node!.link.nc);
    for (let i = 0; i < m.n; i++) {
      const t0 = performance.now();
      await inbox.request(m.subject, '{}', 5_000, undefined);
      h.record((performance.now() - t0) * 1000);
    }
    send({ t: 'done', hist: h.toJSON(), forwarded: node!.router.stats.forwarded });
  } else if (m.t === 'ping') {
    const h = new Histogram();
    pinger ??= await tcpPinger(m.port);
    for (let i = 0; i < m.n; i++) {
      const t0 = performance.now();
      await pinger.ping();
      h.record((performance.now() - t0) * 1000);
    }
    send({ t: 'done', hist: h.toJSON(), forwarded: node!.router.stats.forwarded });
  } else {
    inbox?.close();
    pinger?.socket.destroy();
    await node?.close();
    process.exit(0);
  }
})());
