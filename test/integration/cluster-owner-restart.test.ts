// The owner of an account dies (SIGKILL) and the SAME node (same NODE_ID, restarted) takes the
// account's lease back before any other node does: the owner's id does not change, only the lease
// epoch. A /v1/stream socket on another node must go on streaming: the restarted owner's shard
// knows nothing of that node's sockets, so the other node must reopen their stream there (as it
// does when the account moves to another node). Two gateway processes, a simulator process, real
// nats-server (-js) and PostgreSQL. docs/cluster.md "Failures".
import { beforeAll, describe, expect, it } from 'vitest';
import { useCluster, type ClusterAccount } from '../helpers/clusterProcs.js';
import { orderVia, type Answer } from '../helpers/clusterTraffic.js';
import { expectAccountStream, mustOpen } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

const env = useCluster({ nodes: 2 });
let acct: ClusterAccount;
beforeAll(async () => {
  acct = await env.cluster.account();
}, 60_000);

describe('two nodes: the owner restarts under its own id', () => {
  it('SIGKILL of the owner, the same node back at a new lease epoch: a socket on the other node keeps its stream (no close, no gap) and gets the TRADE of a later order and the quotes it subscribed', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const other = others[0]!;
    const url = (id: string) => env.cluster.node(id).url;
    const before = await env.cluster.lease(acct.id);
    const sock = await mustOpen(url(other), { id: acct.id, heartbeat: '0' }, { 'x-api-key': acct.key });
    try {
      await sock.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
      sock.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await sock.next('SUBSCRIBED', 0, 15_000);
      await sock.until((c) => c.of('QUOTE').length >= 3, 15_000, 'quotes before the kill');

      // The other node is frozen while the owner is down, so it cannot take the lease first: only
      // the restarted owner can. Once thawed it gets, in order, what it would have got running: the
      // owner's announcement of the same node id at a later epoch.
      env.cluster.stop(other);
      try {
        await env.cluster.kill(owner);
        await env.cluster.launch(owner);
        await until(async () => {
          const l = await env.cluster.lease(acct.id);
          return l.live && l.owner === owner && l.epoch > before.epoch;
        }, `${owner} to take its account back at an epoch after ${before.epoch}`, 30_000);
      } finally {
        env.cluster.cont(other);
      }
      expect((await env.cluster.lease(acct.id)).owner).toBe(owner);

      // Quotes: only the owner's shard subscribes the symbol at the broker, for the sockets the
      // other node reopened there. Before, none came: the other node reopened nothing, as the
      // owner's id had not changed.
      const quotes = sock.of('QUOTE').length;
      await sock.until((c) => c.of('QUOTE').length >= quotes + 3, 20_000, 'quotes after the owner came back');

      // An order after the restart: its TRADE reaches the socket in the same stream.
      let sent: Answer | undefined;
      await until(async () => (sent = await orderVia(env.cluster.node(owner), acct, 'after-restart')).status === 200, 'the order accepted', 30_000);
      await sock.until((c) => c.of('TRADE').find((f) => f.data.comment === 'after-restart'), 20_000, 'the TRADE after the restart');
      expect(sock.of('TRADE').find((f) => f.data.comment === 'after-restart')!.data.order).toBe(sent!.ticket);
      // The owner continued the epoch from JetStream (as a new owner would): the socket stayed open, no gap.
      expect(sock.closed).toBeNull();
      expectAccountStream(sock.frames);
    } finally {
      await sock.close();
    }
  }, 120_000);
});
