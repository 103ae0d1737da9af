// The operator console in a real headless Chromium against a real gateway: sign-in, keys shown
// once, seats turning ACTIVE, a broker login going connected, the live view's quotes moving,
// labels rendered as text, the browser-safety headers enforced by the browser itself. The
// screenshots of every page land in test-output/dashboard/ when TAGW_SCREENSHOTS=1 (helpers/browser.ts).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page, Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_CSP } from '../../src/dashboard/assets.js';
import { launchBrowser, type Browser } from '../helpers/browser.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
let browser: Browser;
let mk: string;
/** Pages of third parties: one origin on CORS_ORIGINS, one not. */
let allowedSite: Server;
let otherSite: Server;

function site(): Promise<Server> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>a trading desk on another origin</title><p>client page</p>');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
const originOf = (s: Server) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`;

/**
 * Runs in the third-party page: /GetQuote and a trading call with the key, then /v1/stream until
 * a QUOTE arrives. What the page could read is what the browser let through.
 */
const CLIENT = `async ({ gw, id, key }) => {
  const out = {};
  try {
    const r = await fetch(gw + '/GetQuote?id=' + id + '&symbol=BTCUSD', { headers: { 'x-api-key': key } });
    out.quote = { status: r.status, body: await r.json() };
    const t = await fetch(gw + '/OrderSend?id=' + id + '&symbol=BTCUSD&operation=Buy&volume=0.01', { headers: { 'x-api-key': key, 'idempotency-key': 'browser-1' } });
    out.trade = { status: t.status, body: await t.json() };
  } catch (e) {
    out.fetchError = String(e);
  }
  out.stream = await new Promise((resolve) => {
    const ws = new WebSocket(gw.replace('http', 'ws') + '/v1/stream?id=' + id + '&apiKey=' + encodeURIComponent(key));
    const timer = setTimeout(() => { ws.close(); resolve('no quote'); }, 10000);
    ws.onopen = () => ws.send(JSON.stringify({ action: 'subscribe', symbol: 'BTCUSD' }));
    ws.onmessage = (m) => {
      const f = JSON.parse(m.data);
      if (f.type === 'QUOTE') { clearTimeout(timer); ws.close(); resolve('QUOTE ' + f.data.symbol); }
    };
    ws.onerror = () => { clearTimeout(timer); resolve('refused'); };
  });
  return out;
}`;

async function signIn(page: Page, key = mk): Promise<void> {
  await page.goto(`${t.url}/dashboard`);
  await page.fill('[data-testid=mk]', key);
  await page.click('[data-testid=signin]');
  await page.waitForSelector('[data-testid=nav-overview]');
}

/** The page's next poll now: its clock moved on by `ms` (seats 1.5 s, overview 2 s). */
async function nextPoll(page: Page, ms: number): Promise<void> {
  await page.clock.fastForward(ms);
}

async function go(page: Page, route: string): Promise<void> {
  await page.evaluate(`location.hash = ${JSON.stringify(route)}`);
}

/** A signed-in tab on the seats page, and the time its figures last arrived (`live · HH:MM:SS UTC`). */
async function seatsLive(): Promise<{ page: Page; lastGood: string }> {
  const page = await browser.page();
  await signIn(page);
  await go(page, '/seats');
  const updated = page.locator('[data-testid=updated]', { hasText: 'live' });
  await updated.waitFor();
  return { page, lastGood: (await updated.textContent())!.match(/\d\d:\d\d:\d\d/)![0] };
}

/** Status of an API call with an API key, from the test process (not the browser). */
async function whoami(key: string): Promise<number> {
  return (await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status;
}

beforeAll(async () => {
  // No fixed management key: the bootstrap one, which can be rotated (an env key cannot).
  [allowedSite, otherSite] = await Promise.all([site(), site()]);
  t = await startTestGateway({ managementKey: undefined, seatBuildMs: 5_000, shards: 1, corsOrigins: originOf(allowedSite) });
  mk = t.managementKey;
  browser = await launchBrowser();
  // The pages' clock (timers, Date, performance) runs as a real one; where a test waits for a page's
  // next poll it moves it on by the poll period (nextPoll) instead of waiting the period out.
  await browser.context.clock.install();
}, 30_000);

afterAll(async () => {
  await browser?.close();
  await t?.stop();
  allowedSite?.close();
  otherSite?.close();
});

// A browser shares two cores with the gateway and the other test files: generous limits, no timing assertions.
describe('the operator console in Chromium', { timeout: 60_000 }, () => {
  it('is served with a strict CSP the browser enforces, and refuses a wrong key', async () => {
    const r = await t.req('GET', '/dashboard');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-security-policy')).toBe(DASHBOARD_CSP);
    expect(r.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    const etag = r.headers.get('etag')!;
    expect((await t.req('GET', '/dashboard', { headers: { 'if-none-match': etag } })).status).toBe(304);
    const head = await t.req('HEAD', '/dashboard/js/app.js');
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(Number(head.headers.get('content-length'))).toBeGreaterThan(100);
    expect((await t.req('GET', '/dashboard/no-such-file.js')).status).toBe(404);
    expect(r.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script in the page

    const page = await browser.page();
    await page.goto(`${t.url}/dashboard`);
    await browser.shot(page, '0-sign-in');
    // An inline script injected into the page does not run (script-src 'self').
    await page.addScriptTag({ content: 'window.__inlineRan = true' }).catch(() => undefined);
    expect(await page.evaluate('window.__inlineRan')).toBeUndefined();
    await page.fill('[data-testid=mk]', 'tagw_m_0000000000000000_not-a-real-key');
    await page.click('[data-testid=signin]');
    await page.waitForSelector('text=That is not a valid management key.');
    // A bot's API key pasted by mistake is named for what it is.
    const apiKey = (await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: 'pasted-by-mistake' } })).body.key as string;
    await page.fill('[data-testid=mk]', apiKey);
    await page.click('[data-testid=signin]');
    await page.waitForSelector('text=the console needs the management key');
    expect(await page.content()).not.toContain(apiKey.slice(8)); // the password field only, never echoed
    // The key is in sessionStorage only: no cookie, nothing in the URL.
    await page.fill('[data-testid=mk]', mk);
    await page.click('[data-testid=signin]');
    await page.waitForSelector('[data-testid=version]');
    expect(await page.evaluate("sessionStorage.getItem('tagw.managementKey')")).toBe(mk);
    expect(await browser.context.cookies()).toEqual([]);
    expect(page.url()).not.toContain(mk);
    await page.waitForSelector('[data-testid=families] td');
    // An idle gateway: the console's own /metrics request is not counted as load.
    expect(await page.locator('[data-testid=inflight]').textContent()).toBe('0 other in flight');
    await browser.shot(page, '1-overview');
    await page.close();
  });

  it('creates a private seat that turns ACTIVE, binds a broker login that goes connected, and shows quotes changing', async () => {
    const page = await browser.page();
    await signIn(page);
    await go(page, '/seats');
    await page.selectOption('[data-testid=hosting]', 'private');
    await page.fill('[data-testid=region]', 'us-east');
    await page.click('[data-testid=create-seat-btn]');
    const row = page.locator('[data-testid=seat-row]').first();
    // The build (5 s) outlasts the page's first render of the row on a loaded machine (1.5 s did not always).
    await row.locator('[data-testid=seat-status]', { hasText: 'BUILDING_SERVER' }).waitFor();
    await row.locator('[data-testid=seat-status]', { hasText: 'ACTIVE' }).waitFor({ timeout: 20_000 });
    const seatId = (await row.getAttribute('data-id'))!;
    // The account id a bot needs (?id=) is there whole, not cut to 8 characters.
    expect(await row.locator('[data-testid=seat-id]').textContent()).toBe(seatId);

    await row.locator('[data-testid=seat-more]').click();
    await page.fill('[data-testid=bind-user]', '50001');
    await page.fill('[data-testid=bind-password]', 'pw-of-50001');
    await page.fill('[data-testid=bind-server]', 'Sim-P5-Demo');
    await page.click('[data-testid=bind-submit]');
    await row.locator('[data-testid=conn-phase]', { hasText: 'connected' }).waitFor({ timeout: 10_000 });
    await page.locator('[data-testid=history] li').first().waitFor();
    await browser.shot(page, '2-seats');
    // The password typed is not kept in the page.
    expect(await page.content()).not.toContain('pw-of-50001');

    await row.locator('[data-testid=open-live]').click();
    const bid = page.locator('[data-testid=quote-row][data-symbol=BTCUSD] [data-testid=bid]');
    await bid.waitFor({ timeout: 10_000 });
    const first = await bid.textContent();
    await expect.poll(() => bid.textContent(), { timeout: 10_000, interval: 100 }).not.toBe(first);
    // A quote from another day (forex on a Sunday: Friday's last tick) says its day and is greyed as
    // old, not shown as a bare "21:54:59" beside live ones. The page's clock two days on makes
    // BTCUSD's ticks two days old.
    const btcRow = page.locator('[data-testid=quote-row][data-symbol=BTCUSD]');
    expect(await btcRow.getAttribute('class')).not.toContain('stale');
    await page.clock.setSystemTime(Date.now() + 2 * 86_400_000);
    await expect.poll(() => btcRow.locator('[data-testid=quote-time]').textContent(), { timeout: 10_000, interval: 100 }).toMatch(/^[A-Z][a-z]{2} \d\d:\d\d:\d\d$/);
    expect(await btcRow.getAttribute('class')).toContain('stale');
    await page.clock.setSystemTime(Date.now());
    await expect.poll(() => btcRow.locator('[data-testid=quote-time]').textContent(), { timeout: 10_000, interval: 100 }).toMatch(/^\d\d:\d\d:\d\d$/);
    // A bot trades on the account: the position and the deal arrive over the stream.
    const botKey = (await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: 'bot' } })).body.key as string;
    const order = await t.req('GET', `/OrderSend?id=${seatId}&symbol=BTCUSD&operation=Buy&volume=0.05&clientOrderId=console-1`, { headers: { 'x-api-key': botKey } });
    expect(order.status, order.text).toBe(200);
    await page.locator('[data-testid=position-row]', { hasText: 'BTCUSD' }).waitFor({ timeout: 10_000 });
    await page.locator('[data-testid=trade-row]', { hasText: 'BTCUSD' }).waitFor({ timeout: 10_000 });
    // The position's current price and profit move with the market, not stay as the stream's last
    // POSITIONS list had them (that list changes only when a position does: a newcomer's walk saw a
    // table frozen at its snapshot beside moving quotes and a moving equity).
    const current = page.locator('[data-testid=position-row]', { hasText: 'BTCUSD' }).locator('[data-testid=position-current]');
    const atOpen = await current.textContent();
    await expect.poll(async () => { await nextPoll(page, 2_000); return current.textContent(); }, { timeout: 15_000, interval: 200 }).not.toBe(atOpen);
    await page.locator('[data-testid=balance]', { hasText: '.' }).waitFor();
    await page.locator('[data-testid=chart] canvas').first().waitFor();
    await page.waitForTimeout(300); // one more paint of the chart and tables for the screenshot
    await browser.shot(page, '3-live-account');
    await go(page, '/overview');
    await page.locator('[data-testid=families] td', { hasText: 'classic' }).waitFor();
    // A second scrape gives rates and a first point on the throughput chart.
    await nextPoll(page, 2_000);
    await page.locator('[data-testid=families] td.num', { hasText: /^\d+\.\d$/ }).first().waitFor();
    await page.locator('[data-testid=throughput] canvas').waitFor();
    await nextPoll(page, 2_000);
    await page.locator('[data-testid=throughput][data-points="2"]').waitFor(); // a line, for the screenshot
    await browser.shot(page, '5-overview-busy');
    expect(await page.locator('[data-testid=cluster]').count()).toBe(0); // a single node: no Cluster panel
    // The live view streams with a read-only key scoped to this account, created for itself and
    // kept in the browser for its other tabs.
    const liveKey = JSON.parse((await page.evaluate(`localStorage.getItem('tagw.liveKey.${seatId}')`)) as string).key as string;
    const who = await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': liveKey } });
    expect(who.body).toMatchObject({ readOnly: true, accountScoped: true, seatId });
    // Signing out revokes it, and forgets every key the tab held.
    await page.click('[data-testid=signout]');
    await page.waitForSelector('[data-testid=mk]');
    expect(await whoami(liveKey)).toBe(401);
    expect(await page.evaluate('Object.keys(sessionStorage).length')).toBe(0);
    expect(await page.evaluate("Object.keys(localStorage).filter((k) => k.startsWith('tagw.liveKey.')).length")).toBe(0);
    await page.close();
  }, 60_000); // a 5 s build and a dozen page waits: past the 20 s default on a loaded machine

  it('creates a key shown once, and renders a label full of markup as text', async () => {
    const page = await browser.page();
    await signIn(page);
    await go(page, '/keys');
    const label = '<img src=x onerror=alert(1)>';
    await page.fill('[data-testid=key-label]', label);
    await page.click('[data-testid=create-key-btn]');
    const secret = await page.locator('[data-testid=secret-value]').textContent();
    expect(secret).toMatch(/^tagw_k_/);
    expect(await whoami(secret!)).toBe(200);
    const cell = page.locator('[data-testid=key-label-cell]', { hasText: label });
    await cell.waitFor();
    expect(await cell.textContent()).toBe(label);
    expect(await page.locator('[data-testid=keys] img').count()).toBe(0);
    await browser.shot(page, '4-keys-secret-once');
    await page.click('[data-testid=secret-done]');
    await page.reload();
    await page.waitForSelector('[data-testid=key-row]');
    expect(await page.content()).not.toContain(secret!);
    expect(browser.problems.filter((p) => p.startsWith('dialog'))).toEqual([]);
    // Keys of a seat: read-only and account-scoped, offered for the seat chosen.
    const seats = await t.req('GET', '/v1/seats', { headers: mgmt(mk) });
    await go(page, `/keys/${seats.body.seats[0].id}`);
    await page.waitForSelector('[data-testid=key-readonly]');
    expect(await page.isChecked('[data-testid=key-readonly]')).toBe(true);
    expect(await page.isChecked('[data-testid=key-scoped]')).toBe(true);
    await page.close();
  });

  it('replaces a key: the new one shown once, the old one refused by the API', async () => {
    const page = await browser.page();
    await signIn(page);
    const created = await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: 'to-replace' } });
    const oldKey = created.body.key as string;
    expect(await whoami(oldKey)).toBe(200);
    await go(page, '/keys');
    const row = page.locator(`[data-testid=key-row][data-id="${created.body.id}"]`);
    await row.locator('[data-testid=replace-key]').click();
    await row.locator('[data-testid=replace-key]', { hasText: 'Replace now?' }).click(); // it revokes the old key: two clicks
    const secret = page.locator('[data-testid=secret-value]');
    await secret.waitFor();
    const newKey = (await secret.textContent())!;
    expect(newKey).not.toBe(oldKey);
    expect(await whoami(oldKey)).toBe(401);
    expect(await whoami(newKey)).toBe(200);
    await page.click('[data-testid=secret-done]');
    // Revoke the replacement too, in two clicks.
    const keys = await t.req('GET', '/v1/keys', { headers: mgmt(mk) });
    const replacement = keys.body.keys.find((k: { label: string; revoked: boolean }) => k.label === 'to-replace' && !k.revoked);
    const fresh = page.locator(`[data-testid=key-row][data-id="${replacement.id}"]`);
    await fresh.locator('[data-testid=revoke-key]').click();
    await fresh.locator('[data-testid=revoke-key]', { hasText: 'Revoke now?' }).click();
    await expect.poll(() => whoami(newKey), { timeout: 5_000 }).toBe(401);
    await page.close();
  });

  it('shows each key\'s rate limits and sets its own', async () => {
    const page = await browser.page();
    await signIn(page);
    const created = (await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: 'limited' } })).body;
    await go(page, '/keys');
    const row = page.locator(`[data-testid=key-row][data-id="${created.id}"]`);
    // No limits of its own: the gateway's defaults, in words.
    await row.locator('[data-testid=key-limits] [data-default=yes]', { hasText: 'req/s' }).waitFor();
    expect(await row.locator('[data-testid=key-limits] [data-default=yes]').count()).toBe(2);
    await row.locator('[data-testid=key-limits-edit]').click();
    await page.fill('[data-testid=limit-requests]', '2');
    await page.fill('[data-testid=limit-orders]', '0');
    await page.click('[data-testid=limits-save]');
    await row.locator('[data-testid=key-limits] [data-default=no]', { hasText: '2 req/s' }).waitFor();
    expect(await row.locator('[data-testid=key-limits]').textContent()).toContain('unlimited');
    const keys = (await t.req('GET', '/v1/keys', { headers: mgmt(mk) })).body.keys as { id: string; requestsPerSec: number | null; ordersPerSec: number | null }[];
    expect(keys.find((k) => k.id === created.id)).toMatchObject({ requestsPerSec: 2, ordersPerSec: 0 });
    await page.close();
  });

  it('rotates the management key: the new one shown once, the old tab signed out', async () => {
    const oldTab = await browser.page();
    await signIn(oldTab);
    await oldTab.waitForSelector('[data-testid=version]');
    const tab = await browser.page();
    await signIn(tab);
    await go(tab, '/settings');
    await tab.waitForSelector('[data-testid=config] tbody tr');
    // An unset setting whose default is decided where it is used says what applies, not a bare dash.
    const stepDown = tab.locator('[data-testid=config] tr', { has: tab.locator('td', { hasText: /^clusterStepDownMs$/ }) });
    expect(await stepDown.locator('[data-testid=unset]').textContent()).toMatch(/^unset: the lease: \d+$/);
    await browser.shot(tab, '7-settings');
    await tab.click('[data-testid=rotate]');
    await tab.click('[data-testid=rotate]'); // the second click confirms
    const secret = tab.locator('[data-testid=secret-value]');
    await secret.waitFor();
    const newMk = (await secret.textContent())!;
    expect(newMk).toMatch(/^tagw_m_/);
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(mk) })).status).toBe(401);
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(newMk) })).status).toBe(200);
    // The old tab's next poll is refused: it is signed out and forgets the key.
    await nextPoll(oldTab, 2_000);
    await oldTab.waitForSelector('[data-testid=signed-out]', { timeout: 10_000 });
    await browser.shot(oldTab, '9-signed-out');
    expect(await oldTab.title()).toBe('Sign in · tagw'); // not the page it was signed out from
    expect(await oldTab.evaluate("sessionStorage.getItem('tagw.managementKey')")).toBeNull();
    // The rotating tab carries on with the new key.
    expect(await tab.evaluate("sessionStorage.getItem('tagw.managementKey')")).toBe(newMk);
    await go(tab, '/audit');
    await tab.locator('[data-testid=audit] td', { hasText: 'managementKey.rotate' }).waitFor();
    await browser.shot(tab, '8-audit');
    mk = newMk;
    await oldTab.close();
    await tab.close();
  });

  it('reconnects an account and deletes a seat in two clicks', async () => {
    const page = await browser.page();
    await signIn(page);
    const seat = (await t.req('POST', '/v1/seats', { headers: mgmt(mk), body: {} })).body.id as string;
    await go(page, '/seats');
    const bound = page.locator('[data-testid=seat-row]', { has: page.locator('[data-testid=reconnect]') }).first();
    await bound.locator('[data-testid=reconnect]').click();
    await bound.locator('[data-testid=conn-phase]', { hasText: 'connected' }).waitFor();
    expect(await page.locator('.err').count()).toBe(0);
    const row = page.locator(`[data-testid=seat-row][data-id="${seat}"]`);
    await row.locator('[data-testid=delete-seat]').click();
    await row.locator('[data-testid=delete-seat]', { hasText: 'Delete seat?' }).click();
    await row.waitFor({ state: 'detached' });
    expect((await t.req('GET', `/v1/seats/${seat}`, { headers: mgmt(mk) })).status).toBe(404);
    await page.close();
  });

  it('fits a 390 px phone and a 64-character label without pushing anything off the page', async () => {
    const page = await browser.page();
    await signIn(page);
    await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: `${'L'.repeat(32)}${'x'.repeat(32)}` } });
    for (let i = 0; i < 12; i += 1) await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: `bot-${i}` } });
    /** How far the page scrolls sideways: a table or the nav wider than the window. */
    const overflow = () => page.evaluate('document.documentElement.scrollWidth - innerWidth') as Promise<number>;
    await page.setViewportSize({ width: 390, height: 844 });
    for (const r of ['overview', 'seats', 'keys', 'live', 'calendar', 'audit', 'settings']) {
      await go(page, `/${r}`);
      await page.locator('[data-testid=updated], .panel').first().waitFor();
      await page.locator('table tbody tr').first().waitFor();
      expect(await overflow(), r).toBe(0);
      // The nav sits on top at its own height, not stretched over a short page.
      expect((await page.locator('.side').boundingBox())!.height, r).toBeLessThan(160);
      if (r === 'keys') await browser.shot(page, '10-keys-390px');
      if (r === 'overview') {
        // The requests-per-family table fits its panel: no column cut off behind a sideways scroll.
        const families = page.locator('.panel', { has: page.locator('[data-testid=families]') });
        expect(await families.evaluate((e) => e.scrollWidth - e.clientWidth), 'families panel').toBe(0);
        await browser.shot(page, '13-overview-390px');
      }
    }
    // At 1440 px the long label wraps: every row's actions stay inside the keys panel.
    await page.setViewportSize({ width: 1440, height: 900 });
    await go(page, '/keys');
    const row = page.locator('[data-testid=key-row]', { hasText: 'LLLL' });
    await row.waitFor();
    expect(await overflow()).toBe(0);
    const keysPanel = page.locator('.panel', { has: page.locator('[data-testid=keys]') });
    // The table fits its panel at this width: nothing to scroll, nothing drawn over the padding.
    expect(await keysPanel.evaluate((e) => e.scrollWidth - e.clientWidth)).toBe(0);
    const panel = (await keysPanel.boundingBox())!;
    const revoke = (await row.locator('[data-testid=revoke-key]').boundingBox())!;
    expect(revoke.x + revoke.width).toBeLessThanOrEqual(panel.x + panel.width);
    // Seats with the whole account id, a broker and a Delete armed (wider) fit their panel too.
    expect((await t.req('POST', '/ConnectEx', { headers: mgmt(mk), body: { user: '70001', password: 'pw', server: 'Sim-P5-Demo' } })).status).toBe(200);
    await go(page, '/seats');
    const seatsPanel = page.locator('.panel', { has: page.locator('[data-testid=seats]') });
    await page.locator('[data-testid=seat-row]', { has: page.locator('[data-testid=reconnect]') }).first().locator('[data-testid=delete-seat]').click();
    await page.locator('[data-testid=delete-seat]', { hasText: 'Delete seat?' }).waitFor();
    expect(await seatsPanel.evaluate((e) => e.scrollWidth - e.clientWidth)).toBe(0);
    await go(page, '/keys');
    await row.waitFor();
    // At a 1280 px laptop the created time wraps between date and time, never inside the date.
    await page.setViewportSize({ width: 1280, height: 800 });
    const rowId = await row.getAttribute('data-id');
    const dateLines = await page.evaluate(`(() => {
      const td = document.querySelector('[data-testid=key-row][data-id="${rowId}"] td[title]');
      const date = td.textContent.trim().split(' ')[0];
      const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      const r = document.createRange();
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const i = n.textContent.indexOf(date);
        if (i >= 0) { r.setStart(n, i); r.setEnd(n, i + date.length); break; }
      }
      return r.getClientRects().length;
    })()`);
    expect(dateLines).toBe(1);
    // The drawn arrow of a select has room of its own instead of covering the option's last letters.
    const padRight = Number(await page.evaluate("parseFloat(getComputedStyle(document.querySelector('[data-testid=key-seat]')).paddingRight)"));
    expect(padRight).toBeGreaterThanOrEqual(20);
    await page.close();
  });

  it('a 1000-1279 px window (a small laptop, a tablet, half a wide screen): the nav on top, the seats and keys tables inside their panels', async () => {
    // At 1100 px the seats table ran 47 px and the keys table 148 px past their panels beside the
    // side nav: each row's buttons stacked five high and cut at the edge (Deta, Reconne, Dele), the
    // keys' state and Revoke behind a sideways scroll nothing pointed at.
    const page = await browser.page();
    await signIn(page);
    expect((await t.req('POST', '/ConnectEx', { headers: mgmt(mk), body: { user: '70101', password: 'pw', server: 'Sim-P5-Demo' } })).status).toBe(200);
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(mk), body: { privateHosting: true, region: 'us-east' } });
    await t.req('POST', `/v1/seats/${seat.body.id}/keys`, { headers: mgmt(mk), body: { label: 'browser', readOnly: true, accountScoped: true } });
    for (const width of [1000, 1024, 1100, 1279]) {
      await page.setViewportSize({ width, height: 800 });
      for (const [route, table, last] of [['/seats', 'seats', 'delete-seat'], ['/keys', 'keys', 'revoke-key']] as const) {
        await go(page, route);
        await page.locator(`[data-testid=${last}]`).first().waitFor();
        const panel = page.locator('.panel', { has: page.locator(`[data-testid=${table}]`) });
        expect(await panel.evaluate((e) => e.scrollWidth - e.clientWidth), `${route} at ${width} px`).toBe(0);
        const edge = (await panel.boundingBox())!;
        for (const b of await page.locator(`[data-testid=${last}]`).all()) {
          const box = (await b.boundingBox())!;
          expect(box.x + box.width, `${route} at ${width} px`).toBeLessThanOrEqual(edge.x + edge.width);
        }
      }
      expect(await page.evaluate('document.documentElement.scrollWidth - innerWidth'), `${width} px`).toBe(0);
      // The nav sits above the page at its own height, as on a phone, leaving the tables the width.
      expect((await page.locator('.side').boundingBox())!.height, `${width} px`).toBeLessThan(160);
      await browser.shot(page, `16-keys-${width}px`);
    }
    await page.close();
  });

  it('says on the overview when DATA_DIR is full and how many shards\' background writes wait (from /metrics), and not once it has room', async () => {
    const page = await browser.page();
    await signIn(page);
    await page.waitForSelector('[data-testid=version]');
    expect(await page.locator('[data-testid=disk-full]').count()).toBe(0);
    // The gateway's own /metrics, with the disk full and one shard's writes waiting (disk-full.test.ts
    // shows these series so on a real full disk).
    await page.route('**/metrics', async (r) => {
      const res = await r.fetch();
      const text = (await res.text()).replace(/^tagw_storage_available 1$/m, 'tagw_storage_available 0').replace(/^tagw_storage_shards_waiting 0$/m, 'tagw_storage_shards_waiting 1');
      await r.fulfill({ response: res, body: text });
    });
    await nextPoll(page, 2_000);
    const banner = page.locator('[data-testid=disk-full]');
    await banner.waitFor();
    expect(await banner.textContent()).toBe("The disk holding DATA_DIR is full: trading calls answer 503 STORAGE_UNAVAILABLE until space is freed; 1 shard's background writes wait in memory. See /readyz.");
    await browser.shot(page, '43-overview-disk-full');
    await page.unroute('**/metrics');
    await nextPoll(page, 2_000);
    await banner.waitFor({ state: 'detached' });
    await page.close();
  });

  it('shows the simulated market clock (SIM_START) and the account creations running, queued and refused on the overview, and neither when there is none', async () => {
    const page = await browser.page();
    await page.setViewportSize({ width: 1280, height: 900 });
    await signIn(page);
    await page.waitForSelector('[data-testid=version]');
    // The wall clock and an idle queue: no line of either (this gateway runs no SIM_START).
    expect((await t.req('GET', '/v1/status', { headers: mgmt(mk) })).body.simClock).toBeNull();
    expect(await page.locator('[data-testid=sim-clock]').count()).toBe(0);
    expect(await page.locator('[data-testid=creations]').count()).toBe(0);
    // The gateway's own answers as a gateway on SIM_START with a busy queue gives them
    // (sim-start.test.ts and account-creation-queue.test.ts show these fields so).
    await page.route('**/v1/status', async (r) => {
      const res = await r.fetch();
      const body = { ...(await res.json()), simClock: { start: '2026-01-05T09:00:00.000Z', now: '2026-01-05T09:30:12.345Z' } };
      await r.fulfill({ response: res, json: body });
    });
    await page.route('**/metrics', async (r) => {
      const res = await r.fetch();
      const text = (await res.text()).replace(/^tagw_account_creations_running 0$/m, 'tagw_account_creations_running 1')
        .replace(/^tagw_account_creations_queued 0$/m, 'tagw_account_creations_queued 4').replace(/^tagw_account_creations_refused_total 0$/m, 'tagw_account_creations_refused_total 2');
      await r.fulfill({ response: res, body: text });
    });
    await nextPoll(page, 2_000);
    const clock = page.locator('[data-testid=sim-clock]');
    await clock.waitFor();
    expect(await clock.locator('[data-testid=sim-now]').textContent()).toBe('2026-01-05 09:30:12 UTC');
    expect(await clock.textContent()).toContain('started at 2026-01-05 09:00:00 UTC (SIM_START)');
    expect(await clock.textContent()).toContain('not the wall clock');
    const creations = page.locator('[data-testid=creations]');
    await creations.waitFor();
    expect(await creations.textContent()).toBe('account creations: 1 running · 4 queued · 2 refused');
    // Nothing sideways, at 1280 px and at 1000 px.
    const sideways = () => page.evaluate('document.documentElement.scrollWidth - innerWidth');
    expect(await sideways()).toBe(0);
    await browser.shot(page, '44-overview-sim-clock-creations-1280px');
    await page.setViewportSize({ width: 1000, height: 900 });
    expect(await sideways()).toBe(0);
    await browser.shot(page, '44-overview-sim-clock-creations-1000px');
    await page.unroute('**/v1/status');
    await page.unroute('**/metrics');
    await nextPoll(page, 2_000);
    await clock.waitFor({ state: 'detached' });
    await creations.waitFor({ state: 'detached' });
    await page.close();
  });

  it('shows a P4 account live: its chart from QuoteHistory and the position it holds, not "No such account"', async () => {
    // P4 has no PriceHistoryV2 (404 OPERATION_NOT_ON_PLATFORM), which the page took for "no such
    // account"; and P4 streams no POSITIONS snapshot, so a position held before the page opened was
    // not listed until it changed.
    const bound = await t.req('POST', '/ConnectEx', { headers: mgmt(mk), body: { user: '40001', password: 'pw', server: 'Sim-P4-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    const key = (await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: 'p4-bot' } })).body.key as string;
    expect((await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01`, { headers: { 'x-api-key': key } })).status).toBe(200);
    expect((await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=1000`, { headers: { 'x-api-key': key } })).status).toBe(200);
    const page = await browser.page();
    await signIn(page);
    await go(page, `/live/${id}`);
    await page.locator('[data-testid=position-row]', { hasText: 'BTCUSD' }).waitFor({ timeout: 10_000 });
    // and its pending order (P4 streams no ORDERS at all): from /OpenedOrders, as the positions
    await page.locator('[data-testid=orders] tbody tr', { hasText: 'BuyLimit' }).waitFor();
    await expect.poll(async () => Number(await page.locator('[data-testid=chart]').getAttribute('data-points')), { timeout: 10_000 }).toBeGreaterThan(100);
    expect(await page.locator('[data-testid=live-gone]').count()).toBe(0);
    await browser.shot(page, '17-live-p4');
    await page.close();
  });

  it('says in words when the gateway stops answering or a proxy answers HTML, and how old the figures shown are', async () => {
    const { page, lastGood } = await seatsLive();
    // The gateway gone: the browser says "Failed to fetch"; the console says what it means.
    let refused = 0;
    await page.route('**/v1/seats', (r) => { refused += 1; return r.abort('connectionrefused'); });
    await nextPoll(page, 1_500);
    const err = page.locator('.err', { hasText: 'The gateway does not answer' });
    await err.waitFor();
    expect(await page.locator('.err', { hasText: 'Failed to fetch' }).count()).toBe(0);
    // More refused polls, seconds apart: the time shown stays that of the last answer.
    await expect.poll(async () => {
      await nextPoll(page, 1_500);
      return refused;
    }, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    expect(await page.locator('[data-testid=updated]').textContent()).toMatch(new RegExp(`stale · ${lastGood} UTC`));
    await browser.shot(page, '11-gateway-down');
    // A proxy in front answering its own HTML page: a status in words, never the markup.
    await page.unroute('**/v1/seats');
    await page.route('**/v1/seats', (r) => r.fulfill({ status: 502, contentType: 'text/html', body: '<html><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>' }));
    await nextPoll(page, 1_500);
    await page.locator('.err', { hasText: 'The gateway answered HTTP 502' }).waitFor();
    expect(await page.locator('.err', { hasText: '<h1>' }).count()).toBe(0);
    await page.unroute('**/v1/seats');
    await nextPoll(page, 1_500);
    await page.locator('[data-testid=updated]', { hasText: 'live' }).waitFor();
    await page.close();
  });

  it('says the gateway does not answer when its polls hang (a frozen gateway), not live for ever', async () => {
    // A gateway stopped by SIGSTOP (or an event loop stuck, or packets dropped) accepts connections and
    // answers nothing: the polls' fetches never ended, nothing rendered again, and the page said
    // "live" with a green dot for as long as it stayed frozen (seen for 9 s and counting).
    const { page, lastGood } = await seatsLive();
    let hung = 0;
    await page.route('**/v1/seats', () => { hung += 1; }); // neither answered nor refused
    await expect.poll(async () => {
      await nextPoll(page, 1_500);
      return hung;
    }, { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
    await page.clock.fastForward(10_000);
    await page.locator('.err', { hasText: 'The gateway did not answer within 10 s' }).waitFor();
    expect(await page.locator('[data-testid=updated]').textContent()).toMatch(new RegExp(`stale · ${lastGood} UTC`));
    await page.unroute('**/v1/seats');
    await nextPoll(page, 1_500);
    await page.locator('[data-testid=updated]', { hasText: 'live' }).waitFor();
    await page.close();
  });

  it('pages back through an audit log longer than one page, its details in words', async () => {
    // Well past the newest page of 100 entries.
    for (let i = 0; i < 110; i += 1) await t.req('POST', '/v1/keys', { headers: mgmt(mk), body: { label: `audit-${i}` } });
    const total = async () => {
      let n = 0;
      let before: number | null | undefined;
      do {
        const r = await t.req('GET', `/v1/audit?limit=1000${before ? `&before=${before}` : ''}`, { headers: mgmt(mk) });
        n += r.body.entries.length;
        before = r.body.next;
      } while (before);
      return n;
    };
    const all = await total();
    const page = await browser.page();
    await signIn(page);
    await go(page, '/audit');
    const rows = page.locator('[data-testid=audit-row]');
    await expect.poll(() => rows.count()).toBe(100);
    await page.click('[data-testid=audit-older]');
    await expect.poll(() => rows.count()).toBeGreaterThanOrEqual(all);
    // Under 200 entries: the second page was the last, nothing older to ask for.
    expect(all).toBeLessThan(200);
    await page.locator('[data-testid=audit-older]').waitFor({ state: 'detached' });
    // A seat key's detail reads as words, not as a JSON object.
    expect(await page.locator('[data-testid=audit] td', { hasText: '{"' }).count()).toBe(0);
    await browser.shot(page, '12-audit-older');
    await page.close();
  });

  it('shows this week\'s calendar', async () => {
    const page = await browser.page();
    await signIn(page);
    await go(page, '/calendar');
    // An event's row (not the loading line, nor a phone's day line, hidden at this width).
    await page.locator('[data-testid=calendar-row]').first().waitFor();
    expect(await page.locator('[data-testid=calendar-row]').count()).toBeGreaterThan(0);
    await browser.shot(page, '6-calendar');
    await page.close();
  });

  it('says the request chart waits for its first point (a rate needs two readings), not an empty panel', async () => {
    const page = await browser.page();
    // Only the overview's first reading of /metrics is answered until the others are let through.
    const held: Route[] = [];
    let readings = 0;
    await page.route('**/metrics', (r) => { readings += 1; if (readings === 1) return r.continue(); held.push(r); return undefined; });
    await signIn(page);
    await page.locator('[data-testid=version]').waitFor();
    const waiting = page.locator('[data-testid=throughput-waiting]');
    await waiting.waitFor();
    expect(await page.getAttribute('[data-testid=throughput]', 'data-points')).toBe('0');
    await browser.shot(page, '14-overview-first-reading');
    await page.unroute('**/metrics');
    for (const r of held.splice(0)) await r.continue();
    await nextPoll(page, 2_000);
    await waiting.waitFor({ state: 'detached' });
    expect(Number(await page.getAttribute('[data-testid=throughput]', 'data-points'))).toBeGreaterThan(0);
    await page.close();
  });

  it('lets a page on a listed origin call /GetQuote and stream with a read-only scoped key, and blocks one not listed', async () => {
    const bound = await t.req('POST', '/ConnectEx', { headers: mgmt(mk), body: { user: '60001', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    const key = (await t.req('POST', `/v1/seats/${id}/keys`, { headers: mgmt(mk), body: { label: 'browser', readOnly: true, accountScoped: true } })).body.key as string;
    const args = JSON.stringify({ gw: t.url, id, key });

    const page = await browser.page();
    await page.goto(originOf(allowedSite));
    const ok = await page.evaluate(`(${CLIENT})(${args})`) as Record<string, any>;
    expect(ok.fetchError).toBeUndefined();
    expect(ok.quote.status).toBe(200);
    expect(ok.quote.body).toMatchObject({ symbol: 'BTCUSD' });
    expect(typeof ok.quote.body.bid).toBe('number');
    // Errors reach the page too, with their code: the read-only key may not trade.
    expect(ok.trade).toEqual({ status: 403, body: expect.objectContaining({ error: 'READ_ONLY_KEY' }) });
    expect(ok.stream).toBe('QUOTE BTCUSD');

    await page.goto(originOf(otherSite));
    const blocked = await page.evaluate(`(${CLIENT})(${args})`) as Record<string, any>;
    expect(blocked.fetchError).toMatch(/Failed to fetch/);
    expect(blocked.quote).toBeUndefined();
    expect(blocked.stream).toBe('refused');
    await page.close();
  });

  it('raised no page errors', () => {
    expect(browser.problems).toEqual([]);
  });
});

