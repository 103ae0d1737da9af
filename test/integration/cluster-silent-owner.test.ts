// A call forwarded to an account's owner whose NATS link then dies (the process alive and holding its
// lease, its connection silent: no bytes pass either way, nats-server still routes to it) ends within
// the owner wait instead of the 31 s call bound: the forwarding node asks the owner whether it is
// alive (tagw.node.<id>.alive), finds it silent while nats-server answers, and ends the call. An order
// with a clientOrderId answers 503 with retry-after and is not sent again meanwhile (the same id, once
// the owner is back, replays what the broker did: the fenced claim makes the re-send safe); one
// without answers 503, outcome unknown, and is never sent twice. Two gateway processes, each reaching
// nats-server through a proxy of its own; real PostgreSQL and a simulator process. docs/cluster.md
// "Forwarding".
import { beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_MANAGEMENT_KEY, readyz, useCluster, useNatsProxies, type ClusterAccount, type Readiness } from '../helpers/clusterProcs.js';
import { orderVia, type Answer } from '../helpers/clusterTraffic.js';
import type { LeaseRow } from '../helpers/clusterProcs.js';
import { streamMatcher } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';
import { runBuiltCli } from '../helpers/build.js';
import { EXIT } from '../../src/cli/errors.js';

const OWNER_WAIT_MS = 4_000;
/** CLUSTER_LEASE_MS (useCluster's default) and CLUSTER_STEP_DOWN_MS's default, the lease. */
const LEASE_MS = 1_500;
const STEP_DOWN_MS = LEASE_MS;
/** Far below the 31 s call bound the calls waited before. */
const CEILING_MS = 20_000;
const proxies = useNatsProxies(['a', 'b']);
const env = useCluster({ nodes: 2, ownerWaitMs: OWNER_WAIT_MS, nodeEnv: proxies.nodeEnv });

let acct: ClusterAccount;
beforeAll(async () => {
  acct = await env.cluster.account();
}, 90_000);

/** From the chunk that brings the owner a forwarded call carrying `marker` (which passes), nothing
 *  passes between the owner and nats-server, on any connection, until the returned release. */
function silenceOwnerAfter(owner: string, marker: string): { silenced: Promise<void>; release(): void } {
  const proxy = proxies.of(owner);
  let dead = false;
  let silenced!: () => void;
  const seen = new Promise<void>((r) => { silenced = r; });
  const matches = streamMatcher();
  proxy.watch((dir, chunk, conn) => {
    if (dead) return 'drop';
    if (dir === 'down' && matches(dir, conn, chunk, [`tagw.node.${owner}.call`, marker])) {
      dead = true;
      silenced();
    }
    return undefined;
  });
  return {
    silenced: seen,
    release: () => {
      proxy.watch(undefined);
      // The silent connections go; the owner's client connects again at once.
      proxy.cut();
    },
  };
}

async function brokerCount(comment: string): Promise<number> {
  return (await env.cluster.brokerOrders(acct.login)).filter((o) => o.clientOrderId === comment).length;
}

describe('a forwarded call whose owner falls silent on NATS', () => {
  it('with a clientOrderId: 503 with retry-after within the owner wait; the same id later replays the one order', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const via = env.cluster.node(others[0]!);
    const cut = silenceOwnerAfter(owner, 'silent-1');
    let answer: Answer;
    try {
      const sent = orderVia(via, acct, 'silent-1', CEILING_MS);
      await cut.silenced;
      answer = await sent;
      // Before: no answer within the ceiling (the call waited for its 31 s bound).
      expect(answer.status, JSON.stringify(answer.body)).toBe(503);
      expect(answer.retryAfter).toBeDefined();
      expect(answer.answeredBy).toBe(via.id);
      // The lease never moved: the owner is alive, only its NATS link is silent.
      expect((await env.cluster.lease(acct.id)).owner).toBe(owner);
    } finally {
      cut.release();
    }
    // The owner ran it; a retry of the id once the owner is back replays that order, sent once.
    await until(async () => (await brokerCount('silent-1')) === 1, 'silent-1 at the broker', CEILING_MS);
    let again: Answer | undefined;
    await until(async () => (again = await orderVia(via, acct, 'silent-1')).status === 200, `silent-1 replayed (last: ${JSON.stringify(again?.body)})`, CEILING_MS);
    expect(again!.replay).toBe(true);
    const atBroker = (await env.cluster.brokerOrders(acct.login)).filter((o) => o.clientOrderId === 'silent-1');
    expect(atBroker).toEqual([{ ticket: again!.ticket, clientOrderId: 'silent-1' }]);
  }, 120_000);

  it('without a clientOrderId: 503, outcome unknown, within the owner wait; never sent twice', async () => {
    const { owner, others } = await env.cluster.roles(acct.id);
    const via = env.cluster.node(others[0]!);
    const cut = silenceOwnerAfter(owner, 'silent-2');
    try {
      const q = new URLSearchParams({ id: acct.id, symbol: 'BTCUSD', operation: 'Buy', volume: '0.01', comment: 'silent-2' });
      const sent = fetch(`${via.url}/OrderSend?${q}`, { headers: { 'x-api-key': acct.key }, signal: AbortSignal.timeout(CEILING_MS) });
      await cut.silenced;
      const r = await sent;
      const body = await r.text();
      // Before: no answer within the ceiling (the fetch aborts).
      expect(r.status, body).toBe(503);
      expect(r.headers.get('retry-after')).not.toBeNull();
      expect(body).toMatch(/outcome is unknown/);
    } finally {
      cut.release();
    }
    // The owner ran it once; nobody sent it again.
    await until(async () => (await brokerCount('silent-2')) >= 1, 'silent-2 at the broker', CEILING_MS);
    expect(await brokerCount('silent-2')).toBe(1);
  }, 120_000);

  /** A chunk on its way to the forwarding node that carries an owner's refusal of a call (nothing
   *  ran: CallServer's notOwner) or nats-server's "no responders" (an empty message, status 503). */
  const refusal = (chunk: Buffer) => {
    const text = chunk.toString('latin1');
    return text.includes('"notOwner":true') || text.includes('NATS/1.0 503');
  };

  /** The forwarding node's link loses the owner's reply to the call carrying `marker` (from the
   *  call's way out on, nothing comes back but a refusal: `refusal`), then, once the order is at the
   *  broker, the link is cut and the node connects again at once. Resolves with the call's answer. */
  async function loseReply(marker: string, send: (via: { id: string; url: string }) => Promise<Answer>): Promise<Answer> {
    const { owner, others } = await env.cluster.roles(acct.id);
    const via = env.cluster.node(others[0]!);
    const proxy = proxies.of(via.id);
    // Both links back from the cuts of the tests before (a call to an owner not subscribed yet finds
    // nobody: the node waits for an owner and sends it again).
    for (const n of [owner, via.id]) await until(async () => (await readyz(env.cluster.node(n))).body.cluster?.nats === true, `${n}'s NATS link`, CEILING_MS);
    let forwarded = false;
    let seen!: () => void;
    const reached = new Promise<void>((r) => { seen = r; });
    const matches = streamMatcher();
    proxy.watch((dir, chunk, conn) => {
      // What says the call did not run passes: the owner's refusal ("not held here": its lease moved
      // or lapsed, or, its event loop held up on a loaded machine, had less than the dispatch margin
      // left by its own clock) or nobody listening. The forwarding node sends the call again at once,
      // as it does; dropped, it waited for a reply that never came and the order was never placed
      // (CI: 'lost-reply-1 at the broker' after 20 s; the same here with the owner frozen 1.3 s as
      // the call reached it).
      if (forwarded) return dir === 'down' && !refusal(chunk) ? 'drop' : undefined;
      if (dir === 'up' && matches(dir, conn, chunk, [`tagw.node.${owner}.call`, marker])) {
        forwarded = true;
        seen();
      }
      return undefined;
    });
    let sent: Promise<Answer> | undefined;
    try {
      sent = send(via);
      await reached;
      await until(async () => (await brokerCount(marker)) === 1, `${marker} at the broker`, CEILING_MS);
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      proxy.watch(undefined);
      proxy.cut();
    }
    return sent;
  }

  // Found by `npm run chaos` (a nats-server restart under traffic): such calls waited for their 31 s
  // bound, since the owner, alive, answers the liveness asks. Before: no answer within the ceiling.
  it('the owner\'s reply lost as the forwarding node\'s link drops and is back at once, with a clientOrderId: the call goes to the owner again at the reconnect, which replays the one order', async () => {
    const answer = await loseReply('lost-reply-1', (via) => orderVia(via, acct, 'lost-reply-1', CEILING_MS));
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    const atBroker = (await env.cluster.brokerOrders(acct.login)).filter((o) => o.clientOrderId === 'lost-reply-1');
    expect(atBroker).toEqual([{ ticket: answer.ticket, clientOrderId: 'lost-reply-1' }]);
  }, 120_000);

  it('the same without a clientOrderId: 503, outcome unknown, within the owner wait after the reconnect; never sent twice', async () => {
    const answer = await loseReply('lost-reply-2', async (via) => {
      const q = new URLSearchParams({ id: acct.id, symbol: 'BTCUSD', operation: 'Buy', volume: '0.01', comment: 'lost-reply-2' });
      const sentAt = Date.now();
      const r = await fetch(`${via.url}/OrderSend?${q}`, { headers: { 'x-api-key': acct.key }, signal: AbortSignal.timeout(CEILING_MS) }).catch(() => undefined);
      const body = r ? await r.text() : '';
      return { clientOrderId: 'lost-reply-2', node: via.id, status: r?.status ?? 'refused', body, replay: false, sentAt, answeredAt: Date.now(), ...(r?.headers.get('retry-after') ? { retryAfter: r.headers.get('retry-after')! } : {}) };
    });
    expect(answer.status, String(answer.body)).toBe(503);
    expect(answer.retryAfter).toBeDefined();
    expect(String(answer.body)).toMatch(/outcome is unknown/);
    expect(await brokerCount('lost-reply-2')).toBe(1);
  }, 120_000);

  it('/readyz answers 503 naming NATS while the node\'s link is down, 200 again once it is back', async () => {
    const node = env.cluster.node(env.cluster.running()[0]!.id);
    const proxy = proxies.of(node.id);
    await until(async () => (await readyz(node)).status === 200, `${node.id} ready`, 20_000);
    expect((await readyz(node)).body.cluster).toEqual({ nats: true, database: true });
    // The link dies and stays down: its connection reset, the reconnects refused.
    proxy.target(1);
    proxy.cut();
    let last: { status: number; body: Readiness } | undefined;
    try {
      await until(async () => (last = await readyz(node)).status === 503, 'readyz 503 while NATS is unreachable', 15_000);
      expect(last!.body).toMatchObject({ ready: false, store: true, cluster: { nats: false, database: true } });
    } finally {
      proxy.target(env.engines.nats.port);
    }
    await until(async () => (last = await readyz(node)).status === 200, 'readyz 200 once NATS is back', 20_000);
    expect(last!.body.cluster).toEqual({ nats: true, database: true });
  }, 60_000);
});

describe('a node whose NATS link dies while PostgreSQL stays up', () => {
  let accts: ClusterAccount[];
  const owners = async () => Promise.all(accts.map((a) => env.cluster.lease(a.id)));
  /** Every lease live, one account per node. (A Set of `live && owner` counted a lease released
   *  and not yet taken as `false`, a second member: it passed mid-handover, and the next test's
   *  start then found that lease not live, seen in CI under load.) */
  const oneEach = async () => {
    const o = await owners();
    return o.every((l) => l.live) && new Set(o.map((l) => l.owner)).size === 2;
  };
  beforeAll(async () => {
    accts = [acct, await env.cluster.account()];
    // Two accounts, two nodes: one each.
    await until(oneEach, 'one account per node', 20_000);
  }, 60_000);

  it('cut off past the bound while the other node reaches NATS, it hands its accounts over: orders through the other node succeed, none twice; back, it takes its share again', async () => {
    const cutNode = (await env.cluster.lease(acct.id)).owner!;
    const other = env.cluster.running().find((n) => n.id !== cutNode)!;
    const proxy = proxies.of(cutNode);
    const cutAt = Date.now();
    proxy.target(1);
    proxy.cut();
    let movedMs: number;
    try {
      // Within the bound it still serves its account to requests that reach it directly.
      const direct = await orderVia(env.cluster.node(cutNode), acct, 'stepdown-1');
      await env.cluster.owner(acct.id, { not: cutNode, limitMs: 15_000 });
      movedMs = Date.now() - cutAt;
      // Handed over (no lease waited out), to the node that reaches NATS; it holds both and the cut node takes none.
      expect((await owners()).map((l) => l.owner)).toEqual([other.id, other.id]);
      expect(await (await fetch(`${env.cluster.node(cutNode).url}/metrics`)).text()).toMatch(/^tagw_cluster_stepped_down 1$/m);
      // /v1/status (what `tagw status` and the dashboard show) says so too, and which node's link is down.
      const st = (await (await fetch(`${env.cluster.node(cutNode).url}/v1/status`, { headers: { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}` } })).json()) as { cluster: { steppedDown: boolean; nodes: Array<{ nodeId: string; natsUp: boolean | null }> } };
      expect(st.cluster.steppedDown).toBe(true);
      // `tagw status && deploy-next`: the node answers, but is not one to count on.
      const cliEnv: NodeJS.ProcessEnv = { ...process.env, TAGW_URL: env.cluster.node(cutNode).url, GATEWAY_MANAGEMENT_KEY: CLUSTER_MANAGEMENT_KEY };
      for (const k of ['TAGW_CONFIG', 'NATS_URL', 'DATABASE_URL', 'DATA_DIR']) delete cliEnv[k];
      const status = await runBuiltCli(['status'], cliEnv);
      expect(status.code, status.stderr).toBe(EXIT.NOT_READY);
      expect(status.stderr).toMatch(/^tagw: not ready: (NATS unreachable, )?stepped down \(its accounts handed over to other nodes\)\n$/);
      expect(status.stdout).toMatch(/^stepped down: /m);
      expect(Object.fromEntries(st.cluster.nodes.map((n) => [n.nodeId, n.natsUp]))).toEqual({ [cutNode]: false, [other.id]: true });
      const via = await orderVia(other, acct, 'stepdown-1');
      expect(via.status, JSON.stringify(via.body)).toBe(200);
      if (direct.status === 200) expect({ replay: via.replay, ticket: via.ticket }).toEqual({ replay: true, ticket: direct.ticket });
      expect((await orderVia(other, acct, 'stepdown-2')).status).toBe(200);
    } finally {
      proxy.target(env.engines.nats.port);
    }
    await until(oneEach, 'the node back on NATS to take one account again', 20_000);
    expect(await (await fetch(`${env.cluster.node(cutNode).url}/metrics`)).text()).toMatch(/^tagw_cluster_stepped_down 0$/m);
    const atBroker = (await env.cluster.brokerOrders(acct.login)).map((o) => o.clientOrderId);
    expect(atBroker.filter((id) => id === 'stepdown-1')).toHaveLength(1);
    expect(atBroker.filter((id) => id === 'stepdown-2')).toHaveLength(1);
    console.log(JSON.stringify({ movedMs, stepDownMs: STEP_DOWN_MS, leaseMs: LEASE_MS }));
  }, 60_000);

  /** Each running node's lease figures now and whether it stepped down (its /v1/status). */
  const leaseFigures = async () => Object.fromEntries(await Promise.all(env.cluster.running().map(async (n) => {
    const st = (await (await fetch(`${n.url}/v1/status`, { headers: { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}` } })).json()) as { cluster: { steppedDown: boolean; leases: { handedOver: number; lost: number } } };
    return [n.id, { steppedDown: st.cluster.steppedDown, handedOver: st.cluster.leases.handedOver, lost: st.cluster.leases.lost }] as const;
  })));

  it('with nats-server itself down past the bound nobody steps down: no lease moves', async () => {
    const before: LeaseRow[] = await owners();
    expect(before.every((l) => l.live)).toBe(true);
    const figures = await leaseFigures();
    let during: typeof figures | undefined;
    await env.engines.nats.kill();
    try {
      await until(async () => (await env.cluster.beats()).every((b) => b.natsUp === false), 'every node to report its NATS link down', 10_000);
      // Every node's rounds run on for twice the bound with its link down.
      const mark = (await env.cluster.dbNowMs()) + 2 * STEP_DOWN_MS;
      await until(async () => (await env.cluster.beats()).every((b) => b.natsUp === false && b.atMs > mark), 'rounds past twice the bound', 15_000);
      during = await leaseFigures();
    } finally {
      await env.engines.nats.restart();
    }
    // Back one by one: their rounds on for another bound, every node up again.
    const mark = (await env.cluster.dbNowMs()) + STEP_DOWN_MS;
    await until(async () => (await env.cluster.beats()).every((b) => b.natsUp === true && b.atMs > mark), 'every node back on NATS for a bound', 20_000);
    // Nobody stepped down; while the links were down nobody handed an account over (it keeps its
    // surplus: docs/cluster.md "Stepping down").
    const after = await leaseFigures();
    for (const [id, f] of Object.entries(figures)) {
      expect({ id, during: during![id], after: after[id] }).toMatchObject({ during: { steppedDown: false, handedOver: f.handedOver }, after: { steppedDown: false } });
    }
    // Every lease where it was, at its epoch, none handed over, unless a lease lapsed: a 1.5 s lease
    // on a loaded machine (CI: load 10-40) may not be renewed in time; it is then taken again at a
    // new epoch, by either node, and the spread restored once NATS is back (docs/cluster.md: an
    // owner that cannot renew within the lease drops its accounts). What load does to a lease is not
    // this test's subject (seen 3 times in 35 loaded runs); the lost count says whether it happened.
    const lost = Object.entries(after).reduce((n, [id, f]) => n + f.lost - figures[id]!.lost, 0);
    console.log(JSON.stringify({ leasesLostDuringOutage: lost }));
    if (lost === 0) {
      expect(await owners()).toEqual(before);
      for (const [id, f] of Object.entries(figures)) expect({ id, handedOver: after[id]!.handedOver }).toEqual({ id, handedOver: f.handedOver });
    }
  }, 60_000);
});
