// An order the broker executed whose owner died before it could answer or record it: the new owner
// asks the broker about the record's request id, as one node does after a restart (SPEC §3: the
// same id and parameters replay the original result), instead of 409 IDEMPOTENCY_UNCERTAIN. Found
// by the chaos run (`npm run chaos`, docs/cluster.md "Chaos runs"): the retry of an order that was
// at the broker when its owner was SIGKILLed answered 409 although its TRADE was on the stream.
// The simulator process executes the account's first trade and never sends its reply (fault
// timeoutAfterSend), so the owner is still waiting for it (the bridge's 10 s) when it is killed.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { orderVia, retryingOrder, type Answer } from '../helpers/clusterTraffic.js';
import { until } from '../helpers/until.js';

const env = useCluster({ leaseMs: 1_500, simFaults: (prefix) => [{ kind: 'timeoutAfterSend', login: `${prefix}-1`, count: 1 }] });

describe('three nodes: the owner dies with an order executed and unanswered', () => {
  it('a retry on a survivor replays the broker\'s result (200, its ticket), and so does the next one', async () => {
    const acct = await env.cluster.account();
    const { owner, others } = await env.cluster.roles(acct.id);
    const first = orderVia(env.cluster.node(owner), acct, 'lost-reply-1');
    let broker = await env.cluster.brokerOrders(acct.login);
    await until(async () => (broker = await env.cluster.brokerOrders(acct.login)).length > 0, 'the order executed at the broker', 15_000);
    expect(broker.map((o) => o.clientOrderId)).toStrictEqual(['lost-reply-1']);
    await env.cluster.kill(owner);
    expect((await first).status).toBe('refused');

    const log: Answer[] = [];
    const retry = await retryingOrder(env.cluster, acct, 'lost-reply-1', log, { start: env.cluster.nodes.findIndex((n) => n.id === others[0]) });
    expect({ status: retry.status, ticket: retry.ticket, replay: retry.replay }, JSON.stringify(retry.body)).toStrictEqual({ status: 200, ticket: broker[0]!.ticket, replay: true });
    // Recorded: the other survivor replays it as well, and the broker still has it once.
    const again = await orderVia(env.cluster.node(others[1]!), acct, 'lost-reply-1');
    expect({ status: again.status, ticket: again.ticket, replay: again.replay }).toStrictEqual({ status: 200, ticket: broker[0]!.ticket, replay: true });
    expect(await env.cluster.brokerOrders(acct.login)).toStrictEqual(broker);
  });
});
