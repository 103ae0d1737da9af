// Issue 20: SIGKILL the owner of an account in the middle of a stream of idempotent orders, the
// clients retrying each order (same clientOrderId) on the other nodes. Afterwards the checker over
// the whole history finds every clientOrderId at most once at the broker and every order that got a
// 200 there. Three gateway processes, a simulator process, real nats-server and PostgreSQL.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { acceptableFinal, firstAcceptedAfter, startTraffic, unclean503 } from '../helpers/clusterTraffic.js';
import { assertLedger } from '../helpers/orderLedger.js';
import { until } from '../helpers/until.js';

const LEASE_MS = 1_500;
const env = useCluster({ leaseMs: LEASE_MS });

describe('three nodes: the owner dies', () => {
  it('SIGKILL of the owner under idempotent orders retried on the other nodes: nothing doubled, nothing answered 200 lost; the survivors take over', async () => {
    const acct = await env.cluster.account();
    const before = await env.cluster.owner(acct.id);
    const traffic = startTraffic(env.cluster, acct, { tag: 'kill', clients: 4 });
    const ok = () => traffic.finals.filter((a) => a.status === 200).length;
    await until(() => ok() >= 8, 'eight orders accepted before the kill', 30_000);

    const killedAt = Date.now();
    const acceptedBefore = traffic.finals.length;
    await env.cluster.kill(before.owner);
    const after = await env.cluster.owner(acct.id, { not: before.owner });
    const leaseMovedMs = Date.now() - killedAt;
    expect(after.epoch).toBeGreaterThan(before.epoch);
    // Orders keep being accepted through the survivors.
    await until(() => traffic.finals.slice(acceptedBefore).filter((a) => a.status === 200).length >= 8, 'eight orders accepted after the kill', 45_000);
    await traffic.stop();

    const broker = await env.cluster.brokerOrders(acct.login);
    assertLedger(traffic.log, broker);
    expect(traffic.finals.filter((a) => !acceptableFinal(a)), 'final answers other than 200 or 409 IDEMPOTENCY_UNCERTAIN').toStrictEqual([]);
    expect(traffic.log.map(unclean503).filter(Boolean)).toStrictEqual([]);
    const uncertain = traffic.finals.filter((a) => a.status === 409).length;
    console.log(JSON.stringify({
      scenario: 'sigkill owner', leaseMs: LEASE_MS, leaseMovedMs, attempts: traffic.log.length, orders: traffic.finals.length,
      accepted: traffic.finals.filter((a) => a.status === 200).length, uncertain, refusedOrUnavailable: traffic.log.filter((a) => a.status === 'refused' || a.status === 503).length,
      firstAcceptedAfterKillMs: firstAcceptedAfter(traffic.log, killedAt),
    }));
  }, 150_000);
});
