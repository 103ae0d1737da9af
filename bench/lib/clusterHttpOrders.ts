// bench/cluster.ts's OrderSend as a client meets it: HTTP /OrderSend from this process to the
// compiled gateway processes in cluster mode (test/helpers/clusterProcs.ts: PostgreSQL leases and
// idempotency ledger, a simulator process, nats-server). Local: sent to the account's owner.
// Forwarded: sent to another node (the others in turn), which routes it over NATS to the owner.
// Same accounts (the takeover part's and more, so every node owns some and none runs out of margin),
// each order with its own clientOrderId (so each is claimed in PostgreSQL), after a warm-up the two
// kinds in `pairs` pairs of blocks, ABBA (bench/lib/pairedBlocks.ts): a ratio per pair and one over
// the pooled blocks. Both include what every order costs in cluster mode (HTTP, authentication, the
// fenced claim and its outcome in PostgreSQL); the router-level figures in the same JSON line leave
// all that out and compare the forwarded call with a back-to-back call on the owner's own thread.
import { execFileSync } from 'node:child_process';
import type { ClusterAccount, ClusterNode } from '../../test/helpers/clusterProcs.js';
import { Histogram } from './histogram.js';
import { blockOf, pairedComparison, runPair } from './pairedBlocks.js';
import { SchedTally } from './procSched.js';

export interface HttpOrderFigures {
  /** Orders of each kind measured (pooled over the blocks). */
  orders: number;
  accounts: number;
  /** Pooled over all blocks of the kind. */
  local: { p50: number; p99: number };
  forwarded: { p50: number; p99: number };
  forwardedOverLocalP50: number;
  forwardedOverLocalP99: number;
  /** The blocks pair by pair (base: local, other: forwarded), their ratios' min/median/max, the
   *  pooled summaries with n (pairedComparison). */
  paired: Omit<ReturnType<typeof pairedComparison>, 'tail'>;
  /** µs of CPU and run-queue wait per order: the gateway processes together (owners and forwarding
   *  nodes), nats-server, the simulator process. */
  perOrderUs: { local: Record<string, { cpu: number; runQueue: number }>; forwarded: Record<string, { cpu: number; runQueue: number }> };
}

/** Each of `accts` with its owner's node and the other running nodes (forwarded orders take turns). */
export interface RoutedAccount { acct: ClusterAccount; owner: ClusterNode; others: ClusterNode[] }

export async function measureHttpOrders(opts: { accts: RoutedAccount[]; nodes: ClusterNode[]; simPid: number | undefined; orders: number; pairs: number; warmup: number; tag: string }): Promise<HttpOrderFigures> {
  const BLOCK = Math.ceil(opts.orders / opts.pairs);
  let seq = 0;
  const send = async (forward: boolean, h: Histogram | null, retries = 0): Promise<void> => {
    const a = opts.accts[seq % opts.accts.length]!;
    const { acct } = a;
    const node = forward ? a.others[Math.floor(seq / opts.accts.length) % a.others.length]! : a.owner;
    const clientOrderId = `${opts.tag}-${seq++}`;
    const q = new URLSearchParams({ id: acct.id, symbol: 'BTCUSD', operation: seq % 2 ? 'Sell' : 'Buy', volume: '0.01', clientOrderId });
    const t0 = performance.now();
    const r = await fetch(`${node.url}/OrderSend?${q}`, { headers: { 'x-api-key': acct.key } });
    const text = await r.text();
    // A connection still starting (just created, or moved) during the warm-up: the same order again.
    if (r.status === 503 && h === null && retries < 100) {
      await new Promise((res) => setTimeout(res, 50));
      seq--;
      return send(forward, h, retries + 1);
    }
    h?.record((performance.now() - t0) * 1000);
    if (r.status !== 200) throw new Error(`OrderSend through ${node.id} answered ${r.status}: ${text}`);
  };
  const block = async (forward: boolean, h: Histogram | null, n = BLOCK) => {
    for (let i = 0; i < n; i++) await send(forward, h);
  };
  for (let done = 0; done < opts.warmup; done += 50) {
    await block(false, null, 50);
    await block(true, null, 50);
  }
  const natsPid = (() => {
    try {
      return Number(execFileSync('pgrep', ['-x', 'nats-server', '-P', String(process.pid)], { encoding: 'utf8' }).trim().split('\n')[0]) || undefined;
    } catch {
      return undefined;
    }
  })();
  const pids: Record<string, number | undefined> = { nats: natsPid, sim: opts.simPid };
  for (const n of opts.nodes) pids[n.id] = n.proc.child.pid;
  const localSched = new SchedTally(pids);
  const forwardedSched = new SchedTally(pids);
  const local = new Histogram();
  const forwarded = new Histogram();
  const pairs: Array<{ base: ReturnType<typeof blockOf>; other: ReturnType<typeof blockOf> }> = [];
  const timed = async (forward: boolean) => {
    const h = new Histogram();
    const end = (forward ? forwardedSched : localSched).start();
    await block(forward, h);
    end();
    (forward ? forwarded : local).merge(h.toJSON());
    return blockOf(h);
  };
  for (let i = 0; i < opts.pairs; i++) {
    pairs.push(await runPair(i, () => timed(false), () => timed(true)));
    process.stderr.write(`http orders: ${(i + 1) * BLOCK}/${opts.pairs * BLOCK} of each kind\r`);
  }
  process.stderr.write('\n');
  const { tail: _tail, ...paired } = pairedComparison(pairs);
  const p = (h: Histogram) => ({ p50: h.percentile(50), p99: h.percentile(99) });
  const ratio = (a: number, b: number) => +(a / b).toFixed(2);
  const n = local.count;
  // The nodes' processes summed: which one owns or forwards differs by account.
  const perUnit = (t: SchedTally) => {
    const each = t.perUnit(n);
    const nodes = { cpu: 0, runQueue: 0 };
    for (const node of opts.nodes) {
      nodes.cpu += each[node.id]?.cpu ?? 0;
      nodes.runQueue += each[node.id]?.runQueue ?? 0;
      delete each[node.id];
    }
    return { nodes, ...each };
  };
  return {
    orders: n, accounts: opts.accts.length, local: p(local), forwarded: p(forwarded),
    forwardedOverLocalP50: ratio(forwarded.percentile(50), local.percentile(50)),
    forwardedOverLocalP99: ratio(forwarded.percentile(99), local.percentile(99)),
    paired,
    perOrderUs: { local: perUnit(localSched), forwarded: perUnit(forwardedSched) },
  };
}
