// The owner of an account takes it back at a later lease epoch, without another node holding it in
// between: the owner's id does not change, only the epoch. Its shards start the account afresh,
// knowing no socket's stream of it, so every node must reopen there what its sockets hold (as it
// does when the account moves to another node). Two ways: the owner dies (SIGKILL) and the same
// node (same NODE_ID, restarted) retakes the lease; or PostgreSQL is away past the lease, the owner
// drops the account and takes it back. Two gateway processes, a simulator process, real
// nats-server (-js) and PostgreSQL. docs/cluster.md "Failures and what they cost".
import { beforeAll, describe, expect, it } from 'vitest';
import { useCluster, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia, type Answer } from '../helpers/clusterTraffic.js';
import { expectAccountStream, mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { openWs } from '../helpers/gateway-helpers.js';
import { until } from '../helpers/until.js';

// PostgreSQL of its own: a test here kills and restarts it.
const env = useCluster({ nodes: 2, ownPostgres: true });
let acct: ClusterAccount;
beforeAll(async () => {
  acct = await env.cluster.account();
}, 60_000);

const url = (id: string) => env.cluster.node(id).url;

/** A /v1/stream socket on `node` with its snapshot, subscribed to BTCUSD and getting its quotes. */
async function quoting(node: string): Promise<StreamClient> {
  const sock = await mustOpen(url(node), { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
  await sock.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, `the ORDERS snapshot on ${node}`);
  sock.send({ action: 'subscribe', symbol: 'BTCUSD' });
  await sock.next('SUBSCRIBED', 0, 15_000);
  await sock.until((c) => c.of('QUOTE').length >= 3, 15_000, `quotes on ${node} before`);
  return sock;
}

/**
 * Takes the account from `owner` and gives it back to it at a later epoch (`away`: what makes it
 * lose the lease). The other node is frozen meanwhile, so it cannot take the lease first: only the
 * owner can. Once thawed it gets, in order, what it would have got running: the owner's
 * announcement of the same node id at a later epoch.
 */
async function retaken(owner: string, other: string, away: () => Promise<void>): Promise<void> {
  const before = await env.cluster.lease(acct.id);
  env.cluster.stop(other);
  try {
    await away();
    await until(async () => {
      const l = await env.cluster.lease(acct.id).catch(() => undefined);
      return !!l?.live && l.owner === owner && l.epoch > before.epoch;
    }, `${owner} to take its account back at an epoch after ${before.epoch}`, 30_000);
  } finally {
    env.cluster.cont(other);
  }
}

/** Every socket streams on: quotes (only the owner's shard subscribes the symbol at the broker, for
 *  the sockets reopened there), and the TRADE of an order placed now, in a stream without a gap. */
async function streamsOn(sockets: Record<string, StreamClient>, owner: string, comment: string): Promise<void> {
  for (const [node, sock] of Object.entries(sockets)) {
    const quotes = sock.of('QUOTE').length;
    await sock.until((c) => c.of('QUOTE').length >= quotes + 3, 20_000, `quotes on ${node} after the owner took the account back`);
  }
  let sent: Answer | undefined;
  await until(async () => (sent = await orderVia(env.cluster.node(owner), acct, comment)).status === 200, 'the order accepted', 30_000);
  for (const [node, sock] of Object.entries(sockets)) {
    const trade = await sock.until((c) => c.of('TRADE').find((f) => f.data.comment === comment), 20_000, `the TRADE on ${node}`);
    expect(trade.data.order).toBe(sent!.ticket);
    // The owner continued the epoch from JetStream (as a new owner does): the socket stayed open, no gap.
    expect(sock.closed, node).toBeNull();
    expectAccountStream(sock.frames);
  }
}

describe('two nodes: the owner takes its account back at a later lease epoch', () => {
  it('SIGKILL of the owner, the same node restarted takes the lease back: a /v1/stream socket on the other node keeps its stream (no close, no gap), the TRADE of a later order and the quotes it subscribed; a /ws socket there keeps its session\'s quotes', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const other = others[0]!;
    const sock = await quoting(other);
    // A gateway session made and subscribed through the other node, its /ws socket there too.
    const made = await fetch(`${url(other)}/v1/connect`, {
      method: 'POST', headers: { 'x-api-key': acct.key, 'content-type': 'application/json' }, body: JSON.stringify({ brokerAccountId: acct.id }),
    });
    const { handle } = await made.json() as { handle: string };
    expect(made.status).toBe(200);
    const subscribed = await fetch(`${url(other)}/v1/proxy/Subscribe?handle=${encodeURIComponent(handle)}&symbol=BTCUSD`, { headers: { 'x-api-key': acct.key } });
    expect(subscribed.status).toBe(200);
    const ws = await openWs({ url: url(other) }, handle, acct.key);
    const wsQuote = (from: number) => ws.waitFor((f) => ws.frames.indexOf(f) >= from && f.type === 'QUOTE' && f.data.symbol === 'BTCUSD', 20_000);
    try {
      await wsQuote(0);
      await retaken(owner, other, async () => {
        await env.cluster.kill(owner);
        await env.cluster.launch(owner);
      });
      // Before, no quote came: the other node reopened nothing, as the owner's id had not changed
      // (its account frames came only while the restarted owner's own hold of the kept stream lasted).
      await streamsOn({ [other]: sock }, owner, 'after-restart');
      // The session's pushes come from the owner's restored copy of it (as with a new owner).
      await wsQuote(ws.frames.length);
    } finally {
      ws.ws.close();
      await sock.close();
    }
  }, 120_000);

  it('PostgreSQL away past the lease: the owner drops the account and takes it back; sockets on the owner and on the other node keep their quotes and get the TRADE of a later order', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const other = others[0]!;
    const sockets = { [owner]: await quoting(owner), [other]: await quoting(other) };
    try {
      await retaken(owner, other, async () => {
        await env.engines.pg.kill();
        // Its lease not renewed in time by its own clock: the owner's shards drop the account.
        await until(async () => /^tagw_cluster_accounts_owned 0$/m.test(await (await fetch(`${url(owner)}/metrics`)).text()),
          `${owner} to drop the account`, 20_000);
        await env.engines.pg.restart();
      });
      // Before, neither socket got another quote: the owner's own router did not reopen its
      // sockets' stream on its shards either.
      await streamsOn(sockets, owner, 'after-pg');
    } finally {
      await Promise.all(Object.values(sockets).map((s) => s.close()));
    }
  }, 120_000);
});
