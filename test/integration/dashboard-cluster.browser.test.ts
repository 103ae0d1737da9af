// The operator console's Cluster panel (issue 20 item 7) in headless Chromium against a real
// cluster node: two gateways on nats-server and PostgreSQL, a simulator process. The overview shows
// every node (this one marked), NATS, the accounts without owner and this node's leases and calls,
// which move when an order is forwarded to the owner; and, node b's NATS link cut behind its proxy,
// that it stepped down and which node's link is down. Screenshots at 1440 and 390 px (TAGW_SCREENSHOTS=1) land in
// test-output/dashboard/ (docs/dashboard/overview-cluster*.png are copies).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type Browser } from '../helpers/browser.js';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { mgmt, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { fitsBothWidths, signIn } from '../helpers/dashboardCluster.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
let browser: Browser;
let nodes: TestGateway[] = [];
/** Node b's way to nats-server, which the last test cuts. */
let natsOfB: TcpProxy;
beforeAll(async () => {
  natsOfB = await startTcpProxy(engines.nats.port);
  nodes = await startClusterGateways(engines, ['dash-node-a', 'dash-node-b'], {
    shards: 1, leaseMs: 4_500,
    // b steps down at the first lease round past the cut that finds it still cut.
    perNode: (id) => (id === 'dash-node-b' ? { natsUrl: `nats://127.0.0.1:${natsOfB.port}`, clusterStepDownMs: 100 } : {}),
  });
  browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all(nodes.map((n) => n.stop()));
  await natsOfB?.close();
});

describe('the console of a cluster node', { timeout: 60_000 }, () => {
  it('shows the nodes, this one marked, and its leases and forwarded calls, which move with a forwarded order; fits 1440 and 390 px', async () => {
    const key = (await nodes[0]!.req('POST', '/v1/keys', { headers: mgmt(TEST_MANAGEMENT_KEY), body: { label: 'dash-cluster' } })).body.key as string;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const bound = await nodes[i % 2]!.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `dash-${i}`, password: 'pw', server: 'Sim-P5-Demo' } });
      expect(bound.status).toBe(200);
      ids.push(bound.body.id as string);
    }
    await until(() => ids.every((id) => nodes.some((n) => n.gw.cluster!.owned().includes(id))), 'the accounts to be held');
    // The console is served by node b; an order for an account node a owns goes through node b.
    const [a, b] = nodes as [TestGateway, TestGateway];
    const page = await browser.page();
    await page.setViewportSize({ width: 1440, height: 900 });
    await signIn(page, b);
    const panel = page.locator('[data-testid=cluster]');
    await panel.waitFor();
    const row = (id: string) => page.locator('[data-testid=cluster-node]', { hasText: id });
    await row('dash-node-a').locator('.badge', { hasText: 'live' }).waitFor();
    await row('dash-node-b').locator('.badge', { hasText: 'live' }).waitFor();
    expect(await row('dash-node-b').locator('[data-testid=this-node]').count()).toBe(1);
    expect(await row('dash-node-a').locator('[data-testid=this-node]').count()).toBe(0);
    expect(await panel.textContent()).toMatch(/NATS\s*up/i);
    expect(await panel.textContent()).toContain('Every account has an owner');
    // Accounts by connection state are node b's: the seats bound and running on node a are not
    // "without a broker login" (it said 3 - b's own before).
    const phases = page.locator('[data-testid=phases]');
    await expect.poll(async () => await phases.locator('[data-testid=phases-elsewhere]').textContent(), { timeout: 10_000, interval: 200 })
      .toBe(String(ids.filter((id) => a.gw.cluster!.owned().includes(id)).length));
    expect(await phases.locator('[data-testid=phases-unbound]').textContent()).toBe('0');
    // The seats page says where an account another node runs is (its phase is there), not '—' and
    // 'synced: no' as for an account that is not connected.
    await page.click('[data-testid=nav-seats]');
    const onA = ids.filter((id) => a.gw.cluster!.owned().includes(id));
    for (const id of onA) {
      await page.locator('tr', { hasText: id }).locator('[data-testid=conn-owner]', { hasText: 'on dash-node-a' }).waitFor({ timeout: 10_000 });
    }
    await page.click('[data-testid=nav-overview]');
    await panel.waitFor();
    const forwarded = page.locator('[data-testid=calls-forwarded]');
    const before = Number(await forwarded.textContent());
    const ownedByA = ids.find((id) => a.gw.cluster!.owned().includes(id));
    if (!ownedByA) throw new Error('node a owns none of the three accounts: the accounts did not spread over the two nodes');
    const order = await b.req('GET', `/OrderSend?${new URLSearchParams({ id: ownedByA, symbol: 'BTCUSD', operation: 'Buy', volume: '0.01' })}`, { headers: { 'x-api-key': key } });
    expect(order.status, order.text).toBe(200);
    await expect.poll(async () => Number(await forwarded.textContent()), { timeout: 10_000, interval: 200 }).toBeGreaterThan(before);
    // Each node's row: what it did as its last heartbeat said; node b's forwarded call, node a's
    // served one, once their next heartbeats (a third of the lease apart) landed.
    const cell = (id: string, what: string) => row(id).locator(`[data-testid=node-${what}]`);
    await expect.poll(async () => Number(await cell('dash-node-b', 'forwarded').textContent()), { timeout: 10_000, interval: 200 }).toBeGreaterThan(0);
    await expect.poll(async () => Number(await cell('dash-node-a', 'served').textContent()), { timeout: 10_000, interval: 200 }).toBeGreaterThan(0);
    // Takeovers by how the lease ended: none yet, every account was new.
    expect(await cell('dash-node-a', 'takeovers-expired').textContent()).toBe('0');
    expect(await cell('dash-node-a', 'takeovers-handover').textContent()).toBe('0');
    expect(await page.locator('[data-testid=takeovers-expired]').textContent()).toBe('0');
    expect(await page.locator('[data-testid=takeovers-handover]').textContent()).toBe('0');
    expect(Number(await page.locator('[data-testid=leases-acquired]').textContent())).toBe((await b.req('GET', '/v1/status', { headers: mgmt(TEST_MANAGEMENT_KEY) })).body.cluster.leases.acquired);
    await fitsBothWidths(browser, page, '20-overview-cluster', 'cluster-nodes');
    // The takeovers' two columns fit a small laptop's window too: nothing sideways, not even the table's box.
    const sideways = () => page.evaluate(`[document.documentElement.scrollWidth - innerWidth, document.querySelector('[data-testid=cluster-nodes]').parentElement]
      .map((e) => (typeof e === 'number' ? e : e.scrollWidth - e.clientWidth))`);
    await page.setViewportSize({ width: 1000, height: 900 });
    expect(await sideways()).toEqual([0, 0]);
    await browser.shot(page, '20-overview-cluster-1000px');
    // Node a's heartbeat as an older build writes it (its takeovers not told apart): the total across
    // both columns; and node b having taken over 3 accounts of a crashed node and 1 handed over: the
    // expired ones in the warning tone, what an operator must notice.
    await page.route('**/v1/status', async (r) => {
      const res = await r.fetch();
      const body = await res.json();
      for (const n of body.cluster.nodes) {
        if (n.nodeId === 'dash-node-a') n.leases = { ...n.leases, takeovers: 2, takeoversExpired: undefined, takeoversHandover: undefined };
        else n.leases = { ...n.leases, takeovers: 4, takeoversExpired: 3, takeoversHandover: 1 };
      }
      await r.fulfill({ response: res, json: body });
    });
    await expect.poll(async () => await cell('dash-node-a', 'takeovers').textContent(), { timeout: 10_000, interval: 200 }).toBe('2 in all');
    expect(await row('dash-node-a').locator('[data-testid=node-takeovers-expired]').count()).toBe(0);
    expect(await cell('dash-node-b', 'takeovers-expired').locator('.badge.b-warn').textContent()).toBe('3');
    expect(await cell('dash-node-b', 'takeovers-handover').textContent()).toBe('1');
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(await sideways()).toEqual([0, 0]);
    await browser.shot(page, '20-overview-cluster-older-node-1280px');
    await page.unroute('**/v1/status');
    expect(browser.problems).toEqual([]);
    await page.close();
  });

  it('says this node stepped down and which node reports its NATS link down when b is cut off from NATS; fits 1440 and 390 px', async () => {
    const [a, b] = nodes as [TestGateway, TestGateway];
    const page = await browser.page();
    await page.setViewportSize({ width: 1440, height: 900 });
    await signIn(page, b);
    const panel = page.locator('[data-testid=cluster]');
    const row = (id: string) => page.locator('[data-testid=cluster-node]', { hasText: id });
    await row('dash-node-b').locator('[data-testid=node-nats]', { hasText: 'up' }).waitFor();
    expect(await panel.locator('[data-testid=stepped-down]').count()).toBe(0);
    natsOfB.target(1);
    natsOfB.cut();
    try {
      await panel.locator('[data-testid=stepped-down]').waitFor({ timeout: 20_000 });
      await until(() => b.gw.cluster!.owned().length === 0 && a.gw.cluster!.owned().length === 3, "b's accounts handed over to a", 20_000);
      await row('dash-node-b').locator('[data-testid=node-nats]', { hasText: 'down' }).waitFor();
      // The panel, read every 2 s, has caught up with the handover.
      await row('dash-node-a').locator('td.num', { hasText: /^3$/ }).waitFor();
      await panel.getByText('Every account has an owner. This node owns 0.').waitFor();
      expect(await panel.locator('[data-testid=stepped-down]').textContent()).toBe('stepped down cut off from NATS, its accounts handed over until its link is back');
      expect(await row('dash-node-a').locator('[data-testid=node-nats]').textContent()).toBe('up');
      expect(await panel.locator('.cluster-sum').textContent()).toMatch(/NATS\s*down/);
      const status = (await b.req('GET', '/v1/status', { headers: mgmt(TEST_MANAGEMENT_KEY) })).body.cluster;
      expect(status.steppedDown).toBe(true);
      // Node a took b's accounts over by handover (b released them stepping down), none expired:
      // its row says so once its heartbeat carried them.
      await expect.poll(async () => Number(await row('dash-node-a').locator('[data-testid=node-takeovers-handover]').textContent()), { timeout: 10_000, interval: 200 })
        .toBeGreaterThan(0);
      expect(await row('dash-node-a').locator('[data-testid=node-takeovers-expired]').textContent()).toBe('0');
      await fitsBothWidths(browser, page, '22-overview-cluster-stepped-down', 'cluster-nodes');
    } finally {
      natsOfB.target(engines.nats.port);
    }
    expect(browser.problems).toEqual([]);
    await page.close();
  });
});
