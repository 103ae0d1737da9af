// An account whose broker login is still under way (its node has just taken it over, or the gateway
// has just restarted) is not "not connected": a request waits for the login up to the bound a request
// waits for an owner (CLUSTER_OWNER_WAIT_MS; one node: BROKER_WAIT_MS), then answers 503
// SERVICE_UNAVAILABLE with retry-after, the order not sent; only a login that fails answers
// NOT_CONNECTED. Before, such a request answered NOT_CONNECTED once BROKER_WAIT_MS passed. Real
// nats-server and PostgreSQL, gateways in bridge mode to a simulator behind a TCP proxy that holds
// the account's login (its `hello`) until the test lets it pass. docs/cluster.md "Failures".
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { seedBoundAccount, useClusterEngines } from '../helpers/cluster.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { bindAccount, orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const BROKER_WAIT_MS = 300;
const OWNER_WAIT_MS = 3_000;
const LOGIN = 'connecting';
const engines = useClusterEngines();
let proxy: TcpProxy;
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const account = randomUUID();
const nodes: TestGateway[] = [];

/** Logins of `login` held by the proxy until `release()`; `seen` counts them. */
function holdLogins(login: string) {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const hold = { seen: 0, release };
  proxy.watch((dir, chunk) => {
    const s = chunk.toString();
    if (dir !== 'up' || !s.includes('"op":"hello"') || !s.includes(`"login":"${login}"`)) return undefined;
    hold.seen++;
    return { until: held };
  });
  return hold;
}

const bridgeUrl = () => `tcp://127.0.0.1:${proxy.port}`;

async function startNode(nodeId: string): Promise<TestGateway> {
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: bridgeUrl(), shards: 1, secretKey: secretKey.toString('hex'),
    natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId, clusterLeaseMs: 6_000,
    clusterOwnerWaitMs: OWNER_WAIT_MS, brokerWaitMs: BROKER_WAIT_MS,
  });
  nodes.push(gw);
  return gw;
}

interface Answer { status: number; headers: Headers; body: Record<string, unknown> }
async function orderVia(url: string, key: string, id: string, clientOrderId: string): Promise<Answer> {
  const r = await fetch(`${url}/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${clientOrderId}`, { headers: { 'x-api-key': key } });
  return { status: r.status, headers: r.headers, body: (await r.json()) as Record<string, unknown> };
}

/** The account's owner among `of` once it runs it connected. */
async function connectedOwner(of: TestGateway[]): Promise<TestGateway> {
  await until(() => of.some((n) => n.gw.cluster!.owned().includes(account)), 'a node to take the account\'s lease');
  const owner = of.find((n) => n.gw.cluster!.owned().includes(account))!;
  await until(async () => (await owner.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the owner to connect the account');
  return owner;
}

/** Hands the account from `owner` to `next` (SIGTERM's close) with `next`'s login held. */
async function handOver(owner: TestGateway, next: TestGateway) {
  const hold = holdLogins(LOGIN);
  await owner.stop();
  nodes.splice(nodes.indexOf(owner), 1);
  await until(() => next.gw.cluster!.owned().includes(account), 'the next node to take the account over');
  await until(() => hold.seen === 1, 'the new owner to send its login');
  return hold;
}

beforeAll(async () => {
  proxy = await startTcpProxy(engines.sim.port);
  await seedBoundAccount(engines.tenancy, { apiKey, account, login: LOGIN, secretKey });
}, 60_000);
afterAll(async () => {
  proxy?.watch(undefined);
  for (const n of nodes) await n.stop().catch(() => undefined);
  await proxy?.close();
});

describe('a request for an account whose new owner is still logging in', () => {
  it('waits for the login past BROKER_WAIT_MS and is placed, once, under the new owner\'s lease', async () => {
    const a = await startNode('conn-a');
    const b = await startNode('conn-b');
    const owner = await connectedOwner([a, b]);
    const next = owner === a ? b : a;
    const hold = await handOver(owner, next);
    let answered = false;
    const order = orderVia(next.url, apiKey.value, account, 'wait-1').finally(() => (answered = true));
    // Past the ordinary bound, the login still held: before, the order had its NOT_CONNECTED by now.
    await sleep(BROKER_WAIT_MS * 3);
    const answeredWhileLoginHeld = answered;
    hold.release();
    const placed = await order;
    expect(answeredWhileLoginHeld).toBe(false);
    expect(placed.status, JSON.stringify(placed.body)).toBe(200);
    expect(await orderSend(next.url, apiKey.value, account, 'wait-1')).toMatchObject({ status: 200, replay: true, ticket: placed.body.ticket });
  }, 90_000);

  it('past the owner wait with the login still under way: 503 SERVICE_UNAVAILABLE with retry-after, the order not sent; the retry after the login is placed', async () => {
    const c = await startNode('conn-c');
    const owner = await connectedOwner(nodes);
    const next = owner === c ? nodes.find((n) => n !== c)! : c;
    const hold = await handOver(owner, next);
    try {
      const refused = await orderVia(next.url, apiKey.value, account, 'wait-2');
      // Before: 503 NOT_CONNECTED after BROKER_WAIT_MS.
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ error: 'SERVICE_UNAVAILABLE', connection: 'connecting' });
      expect(refused.headers.get('retry-after')).toBe('1');
      // Nothing was sent: the claim was freed, not left uncertain.
      const claim = await engines.pool.query("SELECT state FROM idempotency WHERE account_id = $1 AND client_order_id = 'wait-2'", [account]);
      expect(claim.rows.map((r) => r.state)).not.toContain('uncertain');
    } finally {
      hold.release();
    }
    expect(await orderSend(next.url, apiKey.value, account, 'wait-2')).toMatchObject({ status: 200, replay: false });
  }, 90_000);
});

describe('one node: an account restored by a restart, its login still under way', () => {
  it('a request waits BROKER_WAIT_MS, then 503 SERVICE_UNAVAILABLE with retry-after (not NOT_CONNECTED); the same order after the login is placed', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tagw-connecting-'));
    const config = { brokerMode: 'bridge' as const, bridgeUrl: bridgeUrl(), shards: 1, brokerWaitMs: BROKER_WAIT_MS };
    let gw = await startTestGateway(config, { dataDir });
    try {
      const { key, id } = await bindAccount(gw.url, gw.managementKey, 'single-connecting');
      await gw.stop();
      const hold = holdLogins('single-connecting');
      gw = await startTestGateway(config, { dataDir });
      let refused: Answer;
      try {
        await until(() => hold.seen === 1, 'the restored account to send its login');
        refused = await orderVia(gw.url, key, id, 'single-1');
      } finally {
        hold.release();
      }
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ error: 'SERVICE_UNAVAILABLE', connection: 'connecting' });
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await orderSend(gw.url, key, id, 'single-1')).toMatchObject({ status: 200, replay: false });
    } finally {
      proxy.watch(undefined);
      await gw.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
