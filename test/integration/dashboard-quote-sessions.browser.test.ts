// The operator console's Cluster panel shows every live node's quote sessions (QUOTE_LOGINS_FILE,
// docs/cluster.md "Quote sessions"), in headless Chromium against real cluster nodes: nats-server,
// PostgreSQL, a simulator process. Node a owns the one account; node b runs none of its server, so
// its socket on it makes b open its quote session (up, the quotes from it alone); node c's quote
// login has a wrong password (refused, the quotes over the relay). Node b's console shows its own
// session now and c's as c's heartbeat wrote it; node a's console shows both. Screenshots at 1440
// and 390 px (TAGW_SCREENSHOTS=1) land in test-output/dashboard/ (docs/dashboard/overview-cluster-quote-sessions*.png
// are copies).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shareRankOf } from '../../src/cluster/rendezvous.js';
import { launchBrowser, type Browser } from '../helpers/browser.js';
import { startClusterGateways, useClusterEngines } from '../helpers/cluster.js';
import { mgmt, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type StreamClient } from '../helpers/stream-helpers.js';
import { fitsBothWidths, signIn } from '../helpers/dashboardCluster.js';
import { until } from '../helpers/until.js';

const SERVER = 'Sim-P5-Demo';
const B = 'dash-qs-b';
const C = 'dash-qs-c';
/** Node a's id: one the lease plan gives the larger share, so it keeps the account as b and c join. */
const A = (() => {
  const others = Math.max(shareRankOf(B), shareRankOf(C));
  for (let i = 0; ; i++) if (shareRankOf(`dash-qs-a${i}`) > others) return `dash-qs-a${i}`;
})();

function quoteLogins(login: string, password: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'tagw-quote-logins-')), 'quote-logins.json');
  writeFileSync(file, JSON.stringify({ [SERVER]: { login, password } }), { mode: 0o600 });
  return file;
}

/** Every node's secret key (started one at a time: startClusterGateways makes one per call). */
const secretKey = randomBytes(32).toString('hex');
const engines = useClusterEngines();
let browser: Browser;
let nodes: TestGateway[] = [];
let sockets: StreamClient[] = [];
beforeAll(async () => {
  nodes = await startClusterGateways(engines, [A], { shards: 1, leaseMs: 4_500, perNode: () => ({ secretKey }) });
  browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  for (const s of sockets) await s.close().catch(() => undefined);
  await browser?.close();
  await Promise.all(nodes.map((n) => n.stop()));
});

describe('the console of a cluster node with quote sessions', { timeout: 90_000 }, () => {
  it("shows each live node's quote session: up and from the session on b, refused and over the relay on c; none on a; fits 1440 and 390 px", async () => {
    const a = nodes[0]!;
    const key = (await a.req('POST', '/v1/keys', { headers: mgmt(TEST_MANAGEMENT_KEY), body: { label: 'dash-qs' } })).body.key as string;
    const bound = await a.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'dash-qs-x', password: 'pw', server: SERVER } });
    expect(bound.status).toBe(200);
    const x = bound.body.id as string;
    await until(() => a.gw.cluster!.owned().includes(x), 'a to own the account');
    const follow = async (node: TestGateway) => {
      const sock = await mustOpen(node.url, { id: x, heartbeat: '0' }, { 'x-api-key': key });
      sockets.push(sock);
      sock.send({ action: 'subscribe', symbol: 'BTCUSD' });
      await sock.next('SUBSCRIBED', 0, 15_000);
      await sock.until((f) => f.of('QUOTE').length >= 3, 20_000, 'quotes');
    };
    // b logs its quote login in first (the simulator keeps its password); c comes with a wrong one.
    nodes.push(...await startClusterGateways(engines, [B], { shards: 1, leaseMs: 4_500, perNode: () => ({ secretKey, quoteLoginsFile: quoteLogins('dash-qs-feed', 'feed-pw') }) }));
    await follow(nodes[1]!);
    nodes.push(...await startClusterGateways(engines, [C], { shards: 1, leaseMs: 4_500, perNode: () => ({ secretKey, quoteLoginsFile: quoteLogins('dash-qs-feed', 'wrong-pw') }) }));
    await follow(nodes[2]!);
    expect(a.gw.cluster!.owned()).toEqual([x]);

    const page = await browser.page();
    await page.setViewportSize({ width: 1440, height: 900 });
    await signIn(page, nodes[1]!);
    const row = (node: string) => page.locator('[data-testid=quote-session]', { has: page.locator('td.node-id', { hasText: node }) });
    await row(B).locator('[data-testid=qs-from]', { hasText: 'session' }).waitFor({ timeout: 20_000 });
    await row(C).locator('[data-testid=qs-state]', { hasText: 'refused' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('[data-testid=quote-session]').count()).toBe(2);
    expect(await row(B).locator('[data-testid=qs-state]').textContent()).toBe('up');
    expect(await row(B).locator('[data-testid=qs-symbols]').textContent()).toBe('BTCUSD');
    expect(await row(B).textContent()).toContain('dash-qs-feed');
    expect(await row(B).textContent()).toContain('this node');
    await expect.poll(async () => Number(await row(B).locator('[data-testid=qs-quotes]').textContent()), { timeout: 10_000, interval: 200 }).toBeGreaterThan(0);
    expect(await row(C).locator('[data-testid=qs-from]').textContent()).toBe('relay');
    expect(await row(C).locator('[data-testid=qs-symbols]').textContent()).toBe('BTCUSD');
    expect(await page.locator('[data-testid=cluster]').textContent()).not.toMatch(/feed-pw|wrong-pw/);
    await fitsBothWidths(browser, page, '44-overview-cluster-quote-sessions', 'quote-sessions');
    // Node a runs none: its console shows b's and c's as their heartbeats wrote them.
    await page.setViewportSize({ width: 1440, height: 900 });
    await signIn(page, a);
    await row(B).locator('[data-testid=qs-state]', { hasText: 'up' }).waitFor({ timeout: 20_000 });
    await row(C).locator('[data-testid=qs-state]', { hasText: 'refused' }).waitFor({ timeout: 20_000 });
    expect(await page.locator('[data-testid=quote-session]').count()).toBe(2);
    expect(browser.problems).toEqual([]);
    await page.close();
  });

  it('shows no quote sessions table where no node has one (the nodes without QUOTE_LOGINS_FILE, their sockets closed)', async () => {
    for (const s of sockets.splice(0)) await s.close();
    // b's session closes with its last symbol; c's refusal stays (not tried again while its shard runs): c stops.
    await nodes.pop()!.stop();
    await until(async () => (await nodes[1]!.req('GET', '/v1/status', { headers: mgmt(TEST_MANAGEMENT_KEY) })).body.cluster.quoteSessions.length === 0, "b's session to close", 20_000);
    const page = await browser.page();
    await page.setViewportSize({ width: 1440, height: 900 });
    await signIn(page, nodes[0]!);
    const panel = page.locator('[data-testid=cluster]');
    await panel.waitFor();
    // b's next heartbeat says it has none; c has left.
    await expect.poll(async () => await page.locator('[data-testid=quote-sessions]').count(), { timeout: 20_000, interval: 200 }).toBe(0);
    await panel.locator('[data-testid=cluster-node]', { hasText: B }).waitFor();
    expect(browser.problems).toEqual([]);
    await page.close();
  });
});
