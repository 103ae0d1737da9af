// An account's owner numbers the events of its own shards only (docs/cluster.md "Streams across
// nodes"), on a gateway process, a simulator process, real nats-server and PostgreSQL.
//
// `npm run chaos` (seed 853588668, schedule 28): the P4 account's owner, frozen by SIGSTOP past its
// lease, woke with its broker connection still open; its shard passed on the deals the simulator
// had written to that connection meanwhile, and they went out on the relay (`tagw.acct.<account>.*`)
// as every shard event does. The new owner follows that subject (its sockets' and kept streams'
// `stream.open` subscribe it) and numbered what arrived as its own: a deal its ledger did not know
// (built from JetStream's deal mark alone after the takeover) became a second TRADE. Here another
// "node" (a NATS connection of the test's own) relays a deal and a POSITIONS of the account, as that
// woken node did: the owner's stream must not carry them.
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SUBJECTS } from '../../src/cluster/subjects.js';
import { encode } from '../../src/cluster/wireCodec.js';
import { useCluster, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia } from '../helpers/clusterTraffic.js';
import { mustOpen } from '../helpers/stream-helpers.js';

const env = useCluster({ nodes: 1 });
let acct: ClusterAccount;
let nc: NatsConnection;

beforeAll(async () => {
  acct = await env.cluster.account();
  nc = await connect({ servers: env.engines.nats.url });
}, 60_000);
afterAll(async () => {
  await nc?.close();
});

describe('account events relayed from another node', () => {
  it('the owner carries only its own shard\'s: a stale deal and POSITIONS from elsewhere are no frames', async () => {
    const { owner } = await env.cluster.roles(acct.id);
    const node = env.cluster.node(owner);
    const sock = await mustOpen(node.url, { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    await sock.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
    expect((await orderVia(node, acct, 'first')).status).toBe(200);
    const first = await sock.until((c) => c.of('TRADE').find((f) => f.data.comment === 'first'), 15_000, 'the first TRADE');
    const firstDeal = first.data as { ticket: number; timeMscUtc: number };

    // What a node that ran the account before would relay: a deal made before the stream's latest
    // one (the stream carried it, or it is another login's past), and its position list.
    const stale = {
      ticket: firstDeal.ticket - 1_000, order: 1, position: 1, symbol: 'BTCUSD', type: 'Buy', entry: 'in', volume: 0.01,
      price: 1, timeMsc: firstDeal.timeMscUtc - 1_000, magic: 0, comment: 'stale', commission: 0, swap: 0, profit: 0,
    };
    nc.publish(SUBJECTS.account(acct.id, 'stream.deal'), encode({ kind: 'stream.deal', key: acct.id, data: { deal: stale } }));
    nc.publish(SUBJECTS.account(acct.id, 'stream.positions'), encode({ kind: 'stream.positions', key: acct.id, data: { src: 7, v: 1_000, positions: [] } }));
    await nc.flush();

    // The owner's own events go on: a later order's TRADE is the next TRADE, with nothing between.
    expect((await orderVia(node, acct, 'second')).status).toBe(200);
    await sock.until((c) => c.of('TRADE').find((f) => f.data.comment === 'second'), 15_000, 'the second TRADE');
    expect(sock.of('TRADE').map((f) => f.data.comment)).toStrictEqual(['first', 'second']);
    // Every POSITIONS after the first TRADE lists the position it opened (the stale one listed none).
    const after = sock.of('POSITIONS').filter((f) => f.seq > first.seq);
    expect(after.length).toBeGreaterThan(0);
    for (const f of after) expect((f.data.positions as unknown[]).length).toBeGreaterThan(0);
    await sock.close();
  }, 90_000);
});
