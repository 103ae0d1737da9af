// tagw/client in a browser, as it is: the SDK bundled by esbuild (no change, no shim) and loaded by
// a page in headless Chromium, another origin than the gateway's (CORS allowlist), with an
// account-scoped read-only key as SPEC §5.10 advises for browsers. It reads the account summary over
// fetch and streams quotes over the browser's own WebSocket.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TagwClient } from '../../src/client/index.js';
import { chromium } from '../helpers/browser.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

const CHROMIUM = '/usr/bin/chromium';
let g: TestGateway;
let page: Server;
let pageUrl: string;
let browser: BrowserContext;
let profile: string;

beforeAll(async () => {
  const bundle = await build({ entryPoints: [join(import.meta.dirname, '../../src/client/index.ts')], bundle: true, format: 'esm', platform: 'browser', target: 'es2022', write: false });
  const js = bundle.outputFiles[0]!.text;
  page = createServer((req, res) => {
    if (req.url === '/tagw-client.js') res.writeHead(200, { 'content-type': 'text/javascript' }).end(js);
    // The page imports the bundle as any web app would and hands the class to the test.
    else res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>sdk</title><script type="module">import { TagwClient } from "/tagw-client.js"; window.TagwClient = TagwClient;</script>');
  });
  await new Promise<void>((r) => page.listen(0, '127.0.0.1', r));
  pageUrl = `http://127.0.0.1:${(page.address() as { port: number }).port}`;
  g = await startTestGateway({ corsOrigins: [pageUrl] });
  profile = mkdtempSync(join(tmpdir(), 'tagw-chromium-'));
  try {
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM, headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  } catch (e) {
    throw new Error(`headless Chromium did not start from ${CHROMIUM}: install it with 'apt-get install -y chromium' (${String(e)})`);
  }
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await g?.stop();
  await new Promise((r) => page?.close(r));
  if (profile) rmSync(profile, { recursive: true, force: true });
});

describe('tagw/client in Chromium', () => {
  it('the bundle reads the account over fetch and streams quotes over the browser WebSocket', async () => {
    const mgmt = new TagwClient({ baseUrl: g.url, managementKey: g.managementKey });
    const full = (await mgmt.keys.create({ label: 'bot' })).key;
    const id = (await new TagwClient({ baseUrl: g.url, apiKey: full }).connectEx({ user: 'sdk-browser', password: 'pw', server: 'Sim-P5-Demo' })).id;
    const browserKey = (await mgmt.seats.createKey(id, { label: 'browser', readOnly: true, accountScoped: true })).key;

    const tab = await browser.newPage();
    await tab.goto(pageUrl);
    await tab.waitForFunction('window.TagwClient !== undefined');
    const result = await tab.evaluate(async ({ base, key, account }) => {
      const Client = (globalThis as unknown as { TagwClient: typeof TagwClient }).TagwClient;
      const c = new Client({ baseUrl: base, apiKey: key });
      const summary = await c.account(account).AccountSummary();
      const frames: string[] = [];
      for await (const f of c.stream(account, { symbols: ['BTCUSD'] })) {
        frames.push(f.type);
        if (f.type === 'QUOTE') return { balance: summary.balance, frames, quote: f.data };
      }
      return { balance: summary.balance, frames, quote: null };
    }, { base: g.url, key: browserKey, account: id });
    expect(result.balance).toBe(10_000);
    expect(result.quote).toMatchObject({ symbol: 'BTCUSD' });
    expect(result.frames).toContain('SUBSCRIBED');
    // A read-only key in the browser cannot trade: the SDK surfaces the gateway's 403 as a value.
    const refused = await tab.evaluate(async ({ base, key, account }) => {
      const Client = (globalThis as unknown as { TagwClient: typeof TagwClient }).TagwClient;
      try {
        await new Client({ baseUrl: base, apiKey: key }).account(account).OrderSend({ symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 });
        return null;
      } catch (e) {
        const err = e as { name: string; code: string; status: number };
        return { name: err.name, code: err.code, status: err.status };
      }
    }, { base: g.url, key: browserKey, account: id });
    expect(refused).toEqual({ name: 'TagwError', code: 'READ_ONLY_KEY', status: 403 });
  });
});
