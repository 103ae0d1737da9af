// Issue 20: a rolling restart of all three nodes (SIGTERM, which hands the node's accounts over,
// then the node started again on its DATA_DIR and port) under idempotent traffic loses and doubles
// nothing. Three gateway processes, a simulator process, real nats-server and PostgreSQL.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { acceptableFinal, startTraffic, tally, unclean503 } from '../helpers/clusterTraffic.js';
import { assertLedger } from '../helpers/orderLedger.js';
import { until } from '../helpers/until.js';

// A handover does not wait for the lease to run out, so a long lease costs nothing here and keeps a
// starved machine's late renewal from looking like a lost account (an order's outcome unknown).
const env = useCluster({ leaseMs: 5_000 });

describe('three nodes: rolling restart', () => {
  it('each node in turn stops (SIGTERM, exit 0) and starts again while clients trade three accounts: nothing lost, nothing doubled', async () => {
    const accts = await Promise.all([env.cluster.account(), env.cluster.account(), env.cluster.account()]);
    const traffic = accts.map((a, i) => startTraffic(env.cluster, a, { tag: `roll${i}`, clients: 1, pauseMs: 400 }));
    const accepted = () => traffic.reduce((n, t) => n + t.finals.filter((a) => a.status === 200).length, 0);
    const moves: Array<{ node: string; exit: number | null; handedOverMs: number }> = [];
    for (const node of env.cluster.nodes.map((n) => n.id)) {
      const before = accepted();
      await until(() => accepted() >= before + 4, `orders accepted before ${node} stops (so far: ${tally(traffic.flatMap((t) => t.log))})`, 45_000);
      const t0 = Date.now();
      const exit = await env.cluster.term(node);
      moves.push({ node, exit, handedOverMs: Date.now() - t0 });
      await env.cluster.launch(node);
    }
    const before = accepted();
    await until(() => accepted() >= before + 4, `orders accepted after the last restart (so far: ${tally(traffic.flatMap((t) => t.log))})`, 45_000);
    await Promise.all(traffic.map((t) => t.stop()));

    for (const [i, a] of accts.entries()) assertLedger(traffic[i]!.log, await env.cluster.brokerOrders(a.login));
    const log = traffic.flatMap((t) => t.log);
    const finals = traffic.flatMap((t) => t.finals);
    expect(moves.map((m) => m.exit)).toStrictEqual([0, 0, 0]);
    // Every account moved by handover: the nodes count takeovers, none of a lease that ran out (which
    // an operator reads as a node that died), on /v1/status and /metrics alike.
    const seen = await Promise.all(env.cluster.nodes.map((n) => env.cluster.takeovers(n.id)));
    expect(seen.map((t) => t.status.takeoversExpired)).toStrictEqual([0, 0, 0]);
    for (const t of seen) expect(t.status.takeoversHandover).toBe(t.status.takeovers);
    expect(seen.reduce((n, t) => n + t.status.takeoversHandover, 0)).toBeGreaterThan(0);
    expect(seen.map((t) => t.metrics)).toStrictEqual(seen.map((t) => ({ expired: 0, handover: t.status.takeoversHandover })));
    expect(log.map(unclean503).filter(Boolean)).toStrictEqual([]);
    // A handover stops the account on the old node before the new one takes it: no order is left
    // with an unknown outcome, so every order is accepted in the end.
    expect(finals.filter((a) => !acceptableFinal(a)).length, `final answers other than 200 or 409 IDEMPOTENCY_UNCERTAIN: ${tally(finals.filter((a) => !acceptableFinal(a)))}`).toBe(0);
    expect(finals.filter((a) => a.status !== 200).map((a) => a.clientOrderId)).toStrictEqual([]);
    console.log(JSON.stringify({
      scenario: 'rolling restart', moves, orders: finals.length, attempts: log.length,
      refused: log.filter((a) => a.status === 'refused').length, unavailable: log.filter((a) => a.status === 503).length,
    }));
  }, 240_000);
});
