// Issue 20: restart NATS, then PostgreSQL, under traffic. While an engine is down requests fail
// cleanly (503, a JSON error, retry-after) or succeed; nothing accepted is lost or doubled (the
// checker); the cluster recovers by itself: afterwards every node accepts orders again. Three
// gateway processes, a simulator process, real nats-server and PostgreSQL.
import { describe, expect, it } from 'vitest';
import { useCluster, type ClusterAccount, type ClusterProcs } from '../helpers/clusterProcs.js';
import { acceptableFinal, firstAcceptedAfter, orderVia, startTraffic, unclean503, type Answer, type Traffic } from '../helpers/clusterTraffic.js';
import { assertLedger } from '../helpers/orderLedger.js';
import { until } from '../helpers/until.js';

// PostgreSQL of its own: this file kills and restarts it.
const env = useCluster({ ownPostgres: true });

/** Every running node accepts a fresh order for the account (the cluster recovered). */
async function everyNodeTrades(acct: ClusterAccount, tag: string, log: Answer[]): Promise<void> {
  for (const n of env.cluster.running()) {
    let i = 0;
    await until(async () => {
      const a = await orderVia(n, acct, `${tag}-${n.id}-${i++}`);
      log.push(a);
      return a.status === 200;
    }, `${n.id} to accept an order again`, 60_000);
  }
}

function check(traffic: Traffic, probes: Answer[], broker: Awaited<ReturnType<ClusterProcs['brokerOrders']>>): void {
  const log = [...traffic.log, ...probes];
  assertLedger(log, broker);
  expect(log.map(unclean503).filter(Boolean)).toStrictEqual([]);
  expect(traffic.finals.filter((a) => !acceptableFinal(a)), 'final answers other than 200 or 409 IDEMPOTENCY_UNCERTAIN').toStrictEqual([]);
}

/** Traffic on a new account; the engine killed once orders flow, left down until the traffic met
 *  the outage (a 503), started again; then every node must trade again and the history be clean. */
async function restartUnderTraffic(name: 'nats' | 'pg'): Promise<void> {
  const engine = env.engines[name];
  const acct = await env.cluster.account();
  const probes: Answer[] = [];
  const traffic = startTraffic(env.cluster, acct, { tag: name, clients: 3 });
  await until(() => traffic.finals.filter((a) => a.status === 200).length >= 5, 'five orders accepted before the restart', 30_000);
  const downAt = Date.now();
  await engine.kill();
  await until(() => traffic.log.some((a) => a.sentAt >= downAt && a.status === 503), `a 503 while ${name} is down`, 30_000);
  const upAt = Date.now();
  await engine.restart();
  await everyNodeTrades(acct, `${name}-after`, probes);
  await traffic.stop();
  check(traffic, probes, await env.cluster.brokerOrders(acct.login));
  console.log(JSON.stringify({
    scenario: `${name} restart`, downMs: upAt - downAt, acceptedAfterRestartMs: firstAcceptedAfter([...traffic.log, ...probes], upAt),
    attempts: traffic.log.length, unavailable: traffic.log.filter((a) => a.status === 503).length,
  }));
}

describe('three nodes: the engines restart under traffic', () => {
  it('NATS restarts: clean 503s or answers meanwhile, nothing accepted lost, every node trades again by itself', () => restartUnderTraffic('nats'), 180_000);

  it('PostgreSQL restarts: trading answers clean 503s while it is down, nothing accepted lost, every node trades again by itself', () => restartUnderTraffic('pg'), 180_000);
});
