// The owner's ledger of other nodes' stream holds (router.ts, streamInterest.ts), on two gateway
// processes, a simulator process, real nats-server and PostgreSQL; what reaches NATS is counted by a
// subscriber of the test's own. docs/cluster.md "Streams" and "Failures".
//
// Market data follows interest: the owner publishes a symbol's market data on NATS only while
// another node's sockets want it (issue 20 item 5; each publish cost the owner's main thread ~50 µs
// a tick). Before, every tick went out, followed by nobody.
//
// A node killed and started again under the same NODE_ID within the lease is never judged departed
// (its heartbeat never lapses), so what its earlier process's sockets held of an account owned by
// another node stayed in that owner's ledger beside the new process's holds, never released: the
// owner's shard kept its symbols subscribed and their ticks published, with no socket left anywhere.
// Each start is now an incarnation (cluster_nodes, numbered by PostgreSQL); the owner releases the
// earlier one's holds when it sees a later one.
//
// A node judged departed after a lapse (frozen past the lease) has its holds released at the owner,
// whose shard closes the account's stream if nobody else holds it; the node, back, opens it again.
// The deals made in between were never emitted: the owner now resyncs with the broker at the reopen.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useCluster, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia } from '../helpers/clusterTraffic.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

// A lease long enough that a node killed and started again is back well before its heartbeat lapses.
// EURUSD (the second symbol of a test below) quoted around the clock: its real sessions stop from
// Friday 21:55 UTC to Sunday 22:00.
const env = useCluster({
  nodes: 2, leaseMs: 8_000,
  simServers: (c) => c.servers.forEach((srv) => srv.symbols.forEach((sym) => {
    if (sym.name === 'EURUSD') Object.assign(sym, { tradeSessions: 'always', quoteSessions: 'always' });
  })),
});
let acct: ClusterAccount;
let nc: NatsConnection;
/** Market data messages on NATS, all of them and BTCUSD's. */
let md = 0;
let btc = 0;
/** When the last BTCUSD message arrived. */
let btcAt = 0;

beforeAll(async () => {
  acct = await env.cluster.account();
  nc = await connect({ servers: env.engines.nats.url });
  nc.subscribe('tagw.md.>', { callback: () => void md++ });
  nc.subscribe('tagw.md.*.BTCUSD.>', { callback: () => { btc++; btcAt = Date.now(); } });
  await nc.flush();
}, 60_000);
afterAll(async () => {
  await nc?.close();
});

const quotes = (sock: StreamClient, symbol = 'BTCUSD') => sock.of('QUOTE').filter((f) => f.data.symbol === symbol).length;

/** A /v1/stream socket on `node`, subscribed to `symbol` and getting its quotes. */
async function quoting(node: string, symbol = 'BTCUSD'): Promise<StreamClient> {
  const sock = await mustOpen(env.cluster.node(node).url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
  await sock.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, `the ORDERS snapshot on ${node}`);
  sock.send({ action: 'subscribe', symbol });
  await sock.next('SUBSCRIBED', 0, 15_000);
  await sock.until((c) => quotes(c as StreamClient, symbol) >= 3, 15_000, `${symbol} quotes on ${node}`);
  return sock;
}

/** `n` more quotes of `symbol` on the socket. */
async function more(sock: StreamClient, n: number, what: string, symbol = 'BTCUSD'): Promise<void> {
  const had = quotes(sock, symbol);
  await sock.until((c) => quotes(c as StreamClient, symbol) >= had + n, 15_000, what);
}

/** No BTCUSD on NATS for `quietMs` (checked within `limitMs`): the last one `quietMs` ago, counted
 *  from when the wait began at the earliest (a window that slides, not one back-to-back windows). */
async function quiet(quietMs: number, limitMs: number, what: string): Promise<void> {
  const from = Date.now();
  await until(() => Date.now() - Math.max(btcAt, from) >= quietMs, what, limitMs);
}

describe('market data between nodes follows interest', () => {
  it('an owner whose symbol only its own sockets want publishes nothing; a socket on another node makes it publish (and get the quotes), its close makes it stop', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const local = await quoting(owner);
    await more(local, 5, 'quotes on the owner');
    // Before: every tick went to NATS as well, followed by nobody.
    expect(md).toBe(0);

    const remote = await quoting(others[0]!);
    // The test's subscriber gets them on a connection of its own: a moment apart, perhaps.
    await until(() => md > 0, 'BTCUSD on NATS once another node wants it', 10_000);
    await more(remote, 3, 'relayed quotes on the other node');

    await remote.close();
    // The last relayed ticks may still be on their way: then nothing more while the owner's socket quotes on.
    await until(async () => {
      const before = md;
      await more(local, 5, 'quotes on the owner');
      return md === before;
    }, 'the owner to stop publishing once no other node wants BTCUSD', 20_000);
    expect(local.closed).toBeNull();
    await local.close();
  }, 90_000);
});

describe('a node started again under its NODE_ID within the lease', () => {
  it('the owner releases what the earlier process\'s socket held (it stops publishing its symbol) and keeps what the new process\'s socket holds', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const other = others[0]!;
    const lease = await env.cluster.lease(acct.id);

    await quoting(other);
    await until(() => btc > 0, 'BTCUSD on NATS', 10_000);
    await env.cluster.kill(other);
    await env.cluster.launch(other);
    // A socket of the new process, on another symbol, from its first moments.
    const second = await quoting(other, 'EURUSD');
    // Within the lease: the owner kept the account, the other node was never judged gone.
    expect(await env.cluster.lease(acct.id)).toMatchObject({ owner, epoch: lease.epoch, live: true });

    // Nobody wants BTCUSD any more: the owner's shard lets it go, and nothing of it reaches NATS.
    // (Before, the earlier process's subscription stayed in the owner's ledger for good.)
    await quiet(2_000, 20_000, 'the owner to stop publishing BTCUSD once no socket wants it');
    // The new process's socket keeps its own: EURUSD quotes go on, its stream stays open.
    await more(second, 3, 'EURUSD quotes after the owner released the earlier process', 'EURUSD');
    expect(second.closed).toBeNull();
    await second.close();
  }, 90_000);
});

describe('a node judged departed after a lapse, back', () => {
  it('gets the TRADE of an order made while the owner had released its socket\'s stream (the owner resyncs at the reopen)', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const other = others[0]!;
    const sock = await quoting(other);
    env.cluster.stop(other);
    try {
      // Past the lease the owner judges it departed and lets its holds go: BTCUSD leaves NATS.
      await quiet(2_000, 40_000, 'the owner to release the frozen node\'s stream');
      const sent = await orderVia(env.cluster.node(owner), acct, 'during-lapse');
      expect(sent.status).toBe(200);
    } finally {
      env.cluster.cont(other);
    }
    const trade = await sock.until((c) => c.of('TRADE').find((f) => f.data.comment === 'during-lapse'), 30_000, 'the TRADE of the order made during the lapse');
    expect(sock.closed).toBeNull();
    expect(trade.data.comment).toBe('during-lapse');
    await sock.close();
  }, 120_000);
});
