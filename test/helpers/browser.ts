// Headless Chromium for the browser tests: the Debian package (`apt-get install chromium`),
// driven by playwright-core, with a fresh profile per launch. One browser per test file.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { BrowserContext, Page } from 'playwright-core';
import { noteUnreaped, reapedCpu, treeCpu } from './procCpu.js';

/** playwright-core, required rather than imported: imported as an ES module, Node first scans its
 *  CommonJS bundle for the names it exports (cjs-module-lexer), which cost each vitest worker that
 *  loaded it 0.4-1.6 CPU-s more than requiring it (measured 2026-11-27). */
export const { chromium } = createRequire(import.meta.url)('playwright-core') as typeof import('playwright-core');

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where the browser tests leave their screenshots (`test-output/dashboard/<name>.png`). */
export const SCREENSHOT_DIR = join(process.cwd(), 'test-output', 'dashboard');
/** Screenshots are taken only when asked (`TAGW_SCREENSHOTS=1 npx vitest run test/integration/dashboard`):
 *  a full-page PNG costs Chromium ~0.6 s of CPU, a third of what dashboard.browser.test.ts spent (9 of
 *  24-33 CPU-seconds on the 2-vCPU machine), and nothing reads them in a test run. No assertion
 *  depends on one; docs/dashboard/*.png are copies of them. */
export const SCREENSHOTS = process.env.TAGW_SCREENSHOTS === '1';

export interface Browser {
  context: BrowserContext;
  /** A new tab; page errors and failed console messages are collected in `problems`. */
  page(): Promise<Page>;
  problems: string[];
  /** The page's screenshot as `<name>.png` when TAGW_SCREENSHOTS=1 (SCREENSHOTS), else nothing. */
  shot(page: Page, name: string): Promise<void>;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: the browser tests need it (apt-get install chromium), or set CHROMIUM_PATH`);
  }
  const profile = mkdtempSync(join(tmpdir(), 'tagw-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      // The renderers and the GPU work in the browser process instead of a process each: no new
      // renderer process per tab (three per test's tab: the blank one, the page's, a spare) and no
      // IPC between them. Same layout, pages and scripts (Blink and V8 as ever). dashboard.browser +
      // dashboard-feedback.browser, each run of the two beside one without (TEST_CPU_OUT, self +
      // children + unreaped, load 28-35): 48.5 -> 39.6 and 48.0 -> 38.8 CPU-s, all tests passing.
      // Chromium calls it a debugging mode: a renderer crash takes the browser down with it, which
      // fails the file as a crashed tab would have failed its test.
      '--single-process',
    ],
  });
  if (SCREENSHOTS) mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const problems: string[] = [];
  return {
    context,
    problems,
    async page() {
      const p = await context.newPage();
      p.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
      p.on('dialog', (d) => {
        problems.push(`dialog: ${d.message()}`);
        void d.dismiss();
      });
      return p;
    },
    async shot(page, name) {
      if (SCREENSHOTS) await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
    },
    async close() {
      // TEST_CPU_OUT (cpuRecord.ts): what Chromium's zygotes and their renderers spent, which no
      // reaped-children time counts (procCpu.ts).
      const tree = process.env.TEST_CPU_OUT ? treeCpu(`--user-data-dir=${profile}`) : undefined;
      const reapedBefore = reapedCpu();
      await context.close();
      if (tree !== undefined) noteUnreaped(tree - (reapedCpu() - reapedBefore));
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

