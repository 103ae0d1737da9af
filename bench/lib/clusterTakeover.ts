// bench/cluster.ts's takeover part, as an operator meets it: three gateway PROCESSES in cluster mode
// (the compiled build), a simulator process, a real nats-server and PostgreSQL (the scenarios'
// harness, test/helpers/clusterProcs.ts). Accounts per node: how N accounts' leases spread over the
// nodes. OrderSend over HTTP, to the owner vs. through another node (clusterHttpOrders.ts). Takeover: SIGKILL the owner of an account, then orders through a survivor (one after
// another, no pause) until one is answered 200: kill -> that answer, with the lease setting used.
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterProcs, startEngines } from '../../test/helpers/clusterProcs.js';
import { orderVia } from '../../test/helpers/clusterTraffic.js';
import { cleanupProcesses } from '../../test/helpers/process.js';
import { measureHttpOrders, type HttpOrderFigures } from './clusterHttpOrders.js';

export interface TakeoverFigures {
  leaseMs: number;
  nodes: number;
  accounts: number;
  /** Accounts whose live lease each node holds (node ids by order of start: a, b, c). */
  accountsPerNode: number[];
  /** SIGKILL of the owner -> the first 200 to an OrderSend on the account through a survivor. */
  takeoverMs: number;
  /** Each order tried through the survivor until then: its answer (status, 'refused' when none came
   *  within 20 s) and how long it took, ms. A 503 is the owner wait running out. */
  attempts: Array<[number | 'refused', number]>;
  /** OrderSend over HTTP to the owner vs. through another node, before the kill (clusterHttpOrders.ts). */
  httpOrderSend: HttpOrderFigures;
}

/** Orders the HTTP part sends an account at most: a demo account's margin lasts a few hundred 0.01
 *  BTCUSD positions (32.50 USD each of 10,000). */
const HTTP_PER_ACCOUNT = 150;

export async function measureTakeover(opts: { leaseMs: number; accounts: number; httpOrders: number; httpPairs: number; httpWarmup: number }): Promise<TakeoverFigures> {
  const engines = await startEngines();
  let cluster: ClusterProcs | undefined;
  try {
    cluster = await ClusterProcs.start(engines, { nodes: 3, leaseMs: opts.leaseMs });
    const accts = [];
    for (let i = 0; i < opts.accounts; i++) accts.push(await cluster.account());
    const owners = await Promise.all(accts.map((a) => cluster!.owner(a.id)));
    const accountsPerNode = cluster.nodes.map((n) => owners.filter((o) => o.owner === n.id).length);
    // More accounts for the HTTP orders (after the spread is counted), none past HTTP_PER_ACCOUNT.
    const httpTotal = 2 * (Math.ceil(opts.httpOrders / opts.httpPairs) * opts.httpPairs + Math.ceil(opts.httpWarmup / 50) * 50);
    const httpAccts = [...accts];
    while (httpAccts.length < Math.ceil(httpTotal / HTTP_PER_ACCOUNT)) httpAccts.push(await cluster.account());
    const httpOwners = [...owners, ...await Promise.all(httpAccts.slice(accts.length).map((a) => cluster!.owner(a.id)))];
    const c = cluster;
    const httpOrderSend = await measureHttpOrders({
      accts: httpAccts.map((acct, i) => ({ acct, owner: c.node(httpOwners[i]!.owner), others: c.running().filter((n) => n.id !== httpOwners[i]!.owner) })),
      nodes: c.running(), simPid: c.sim.proc.child.pid, orders: opts.httpOrders, pairs: opts.httpPairs, warmup: opts.httpWarmup, tag: 'http',
    });

    const acct = accts[0]!;
    const { owner } = owners[0]!;
    const survivor = cluster.running().find((n) => n.id !== owner)!;
    const warm = await orderVia(survivor, acct, 'takeover-warm');
    if (warm.status !== 200) throw new Error(`order before the kill answered ${warm.status}: ${JSON.stringify(warm.body)}`);
    const killedAt = performance.now();
    await cluster.kill(owner);
    const attempts: TakeoverFigures['attempts'] = [];
    for (;;) {
      const a = await orderVia(survivor, acct, `takeover-${attempts.length}`);
      attempts.push([a.status, a.answeredAt - a.sentAt]);
      if (a.status === 200) break;
      if (performance.now() - killedAt > 60_000) throw new Error(`no order accepted within 60 s of the kill (last ${a.status})`);
      if (a.status === 'refused') await sleep(10);
    }
    const takeoverMs = Math.round(performance.now() - killedAt);
    return { leaseMs: opts.leaseMs, nodes: 3, accounts: opts.accounts, accountsPerNode, takeoverMs, attempts, httpOrderSend };
  } finally {
    await cluster?.close();
    cleanupProcesses();
    await engines.stop();
  }
}
