// Issue 20, fencing: SIGSTOP the owner of an account past its lease, let another node take the
// account over and trade it, then SIGCONT. The paused node performs no broker call and no write for
// the account: the orders sent to it while it was frozen are not executed under its old lease (none
// at the broker unless the new owner carried it out, none recorded at the old epoch), and the new
// owner's records stay intact. Three gateway processes, a simulator process, real engines.
import { describe, expect, it } from 'vitest';
import { useCluster } from '../helpers/clusterProcs.js';
import { acceptableFinal, orderVia, retryingOrder, unclean503, type Answer } from '../helpers/clusterTraffic.js';
import { assertLedger } from '../helpers/orderLedger.js';
import { until } from '../helpers/until.js';

const LEASE_MS = 1_500;
const env = useCluster({ leaseMs: LEASE_MS });

describe('three nodes: a paused owner is fenced', () => {
  it('SIGSTOP past the lease, another node takes over and trades, SIGCONT: the old owner executes and records nothing for the account', async () => {
    const acct = await env.cluster.account();
    const log: Answer[] = [];
    const old = await env.cluster.owner(acct.id);
    const frozen = env.cluster.node(old.owner);
    const warm = await orderVia(frozen, acct, 'fence-before');
    log.push(warm);
    expect(warm.status, JSON.stringify(warm.body)).toBe(200);

    env.cluster.stop(old.owner);
    // Orders sent to the frozen node wait in its socket; it reads them when it resumes.
    const toFrozen = ['fence-frozen-1', 'fence-frozen-2', 'fence-frozen-3'].map((id) => orderVia(frozen, acct, id, 60_000));
    const next = await env.cluster.owner(acct.id, { not: old.owner });
    expect(next.epoch).toBeGreaterThan(old.epoch);
    // The new owner trades the account (through itself and through the third node).
    const third = env.cluster.running().find((n) => n.id !== next.owner)!;
    for (const [i, node] of [env.cluster.node(next.owner), third].entries()) {
      const a = await retryingOrder(env.cluster, acct, `fence-new-${i}`, log, { start: env.cluster.running().indexOf(node) });
      expect(a.status, JSON.stringify(a.body)).toBe(200);
    }
    const claimsBefore = await env.cluster.claims(acct.id);

    env.cluster.cont(old.owner);
    const frozenAnswers = await Promise.all(toFrozen);
    log.push(...frozenAnswers);
    // On resuming, the node found its own deadline past and dropped the account (a lost lease).
    const lost = async () => {
      const text = await (await fetch(`${frozen.url}/metrics`)).text();
      return Number(/^tagw_cluster_leases_total\{event="lost"\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    await until(async () => (await lost()) >= 1, `${old.owner} to count its lease of ${acct.id} lost`, 20_000);
    // Whatever the resumed node answered, nothing was done under its old lease: every record
    // written since the takeover carries a newer epoch, and the new owner's records are unchanged.
    const claims = await env.cluster.claims(acct.id);
    for (const c of claims.filter((x) => x.clientOrderId !== 'fence-before')) expect(c.epoch, JSON.stringify(c)).toBeGreaterThanOrEqual(next.epoch);
    for (const c of claimsBefore) expect(claims).toContainEqual(c);
    for (const a of frozenAnswers) {
      expect(a.status === 200 || a.status === 503, JSON.stringify(a)).toBe(true);
      expect(unclean503(a)).toBeUndefined();
    }
    // The account still trades (whoever owns it now), and the history is clean.
    await until(async () => (await env.cluster.lease(acct.id)).live, 'a live owner after SIGCONT', 20_000);
    for (const [i, n] of env.cluster.running().entries()) {
      const a = await retryingOrder(env.cluster, acct, `fence-after-${i}`, log, { start: env.cluster.running().indexOf(n) });
      expect(acceptableFinal(a) && a.status === 200, JSON.stringify(a)).toBe(true);
    }
    const broker = await env.cluster.brokerOrders(acct.login);
    assertLedger(log, broker);
    const frozenExecuted = broker.filter((o) => o.clientOrderId.startsWith('fence-frozen-'));
    for (const o of frozenExecuted) {
      // Executed only by a later owner, under a claim of its lease.
      expect(claims.find((c) => c.clientOrderId === o.clientOrderId)?.epoch).toBeGreaterThanOrEqual(next.epoch);
    }
    console.log(JSON.stringify({ scenario: 'sigstop owner', leaseMs: LEASE_MS, frozenAnswers: frozenAnswers.map((a) => a.status), frozenExecutedByNewOwner: frozenExecuted.length }));
  }, 150_000);
});
