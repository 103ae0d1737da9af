// An order at the broker when its account leaves the owner (its lease lost, or handed over): the
// owner stops the account and the order's reply can no longer come there. Its client is told the
// account moved while the order was in flight, 503 with retry-after ("retry with the same
// clientOrderId"), not 500 TERMINAL_ERROR ("reply lost ... retrying answers 409"): the retry lands
// on the next owner, which asks the broker about the order's request id and replays its answer.
// Found by the chaos run (`npm run chaos`, seed 1219291306: PostgreSQL restarted, the accounts
// moved between nodes for a few seconds; an order executed at the broker answered 500).
// The simulator executes the account's first trade and never sends its reply (fault
// timeoutAfterSend), so the order is still out at the owner when the account moves.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { orderVia, retryingOrder, type Answer } from '../helpers/clusterTraffic.js';
import { until } from '../helpers/until.js';

const env = useCluster({
  nodes: 2,
  simFaults: (prefix) => [{ kind: 'timeoutAfterSend', login: `${prefix}-lapse`, count: 1 }],
});

describe('an order in flight when its account moves', () => {
  it('the owner loses the lease with the order out at the broker: 503 with retry-after, and the retry with the same id replays the broker\'s answer (200)', async () => {
    const acct = await env.cluster.account('Sim-P5-Demo', { login: 'lapse' });
    const { owner } = await env.cluster.roles(acct.id);
    const first = orderVia(env.cluster.node(owner), acct, 'lapse-1');
    let broker = await env.cluster.brokerOrders(acct.login);
    await until(async () => (broker = await env.cluster.brokerOrders(acct.login)).length > 0, 'the order executed at the broker', 15_000);
    expect(broker.map((o) => o.clientOrderId)).toStrictEqual(['lapse-1']);

    // Its renewal does not land in time: the owner drops the account at its next round.
    await env.cluster.expireLease(acct.id);
    const a = await first;
    expect({ status: a.status, error: (a.body as { error?: string }).error, retryAfter: a.retryAfter }, JSON.stringify(a.body))
      .toStrictEqual({ status: 503, error: 'SERVICE_UNAVAILABLE', retryAfter: '1' });
    expect((a.body as { message: string }).message).toMatch(/retry with the same clientOrderId/);

    const log: Answer[] = [];
    const retry = await retryingOrder(env.cluster, acct, 'lapse-1', log);
    expect({ status: retry.status, ticket: retry.ticket, replay: retry.replay }, JSON.stringify(retry.body)).toStrictEqual({ status: 200, ticket: broker[0]!.ticket, replay: true });
    expect(await env.cluster.brokerOrders(acct.login)).toStrictEqual(broker);
  }, 90_000);
});
