// The operator console's Cluster panel (issue 20 item 7) in headless Chromium against a real
// cluster node: two gateways on nats-server and PostgreSQL, a simulator process. The overview shows
// every node (this one marked), NATS, the accounts without owner and this node's leases and calls,
// which move when an order is forwarded to the owner. Screenshots at 1440 and 390 px land in
// test-output/dashboard/.
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, type Browser } from '../helpers/browser.js';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { mgmt, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
let browser: Browser;
let nodes: TestGateway[] = [];
beforeAll(async () => {
  nodes = await startClusterGateways(engines, ['dash-node-a', 'dash-node-b'], { shards: 1, leaseMs: 6_000 });
  browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await Promise.all(nodes.map((n) => n.stop()));
});

async function signIn(page: Page, node: TestGateway): Promise<void> {
  await page.goto(`${node.url}/dashboard`);
  await page.fill('[data-testid=mk]', TEST_MANAGEMENT_KEY);
  await page.click('[data-testid=signin]');
  await page.waitForSelector('[data-testid=nav-overview]');
}

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
    const forwarded = page.locator('[data-testid=calls-forwarded]');
    const before = Number(await forwarded.textContent());
    const ownedByA = ids.find((id) => a.gw.cluster!.owned().includes(id));
    if (!ownedByA) throw new Error('node a owns none of the three accounts: the accounts did not spread over the two nodes');
    const order = await b.req('GET', `/OrderSend?${new URLSearchParams({ id: ownedByA, symbol: 'BTCUSD', operation: 'Buy', volume: '0.01' })}`, { headers: { 'x-api-key': key } });
    expect(order.status, order.text).toBe(200);
    await expect.poll(async () => Number(await forwarded.textContent()), { timeout: 10_000, interval: 200 }).toBeGreaterThan(before);
    expect(Number(await page.locator('[data-testid=leases-acquired]').textContent())).toBe((await b.req('GET', '/v1/status', { headers: mgmt(TEST_MANAGEMENT_KEY) })).body.cluster.leases.acquired);
    /** How far the page, or the panel, scrolls sideways. */
    const overflow = () => page.evaluate('document.documentElement.scrollWidth - innerWidth') as Promise<number>;
    expect(await overflow()).toBe(0);
    expect(await panel.evaluate((e) => e.scrollWidth - e.clientWidth)).toBe(0);
    await browser.shot(page, '20-overview-cluster-1440px');
    await page.setViewportSize({ width: 390, height: 844 });
    await panel.waitFor();
    expect(await overflow()).toBe(0);
    expect(await panel.evaluate((e) => e.scrollWidth - e.clientWidth)).toBe(0);
    await browser.shot(page, '21-overview-cluster-390px');
    expect(browser.problems).toEqual([]);
    await page.close();
  });
});
