// The console of a cluster node, for the browser tests of its Cluster panel
// (dashboard-cluster.browser.test.ts, dashboard-quote-sessions.browser.test.ts).
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import type { Browser } from './browser.js';
import { TEST_MANAGEMENT_KEY, type TestGateway } from './gateway.js';

/** Signs in to the console `node` serves with the test management key, on its overview. */
export async function signIn(page: Page, node: TestGateway): Promise<void> {
  await page.goto(`${node.url}/dashboard`);
  await page.fill('[data-testid=mk]', TEST_MANAGEMENT_KEY);
  await page.click('[data-testid=signin]');
  await page.waitForSelector('[data-testid=nav-overview]');
}

/** Neither the page, nor the Cluster panel, nor the box of the table `table` (a data-testid) scrolls
 *  sideways (a column cut off) at 1440 px, then at 390 px: a screenshot at each, `<shot>-1440px` and
 *  `<shot>-390px`. */
export async function fitsBothWidths(browser: Browser, page: Page, shot: string, table: string): Promise<void> {
  const sideways = () => page.evaluate(`[document.documentElement.scrollWidth - innerWidth, ...[document.querySelector('[data-testid=cluster]'),
    document.querySelector('[data-testid=${table}]').parentElement].map((e) => e.scrollWidth - e.clientWidth)]`) as Promise<number[]>;
  expect(await sideways()).toEqual([0, 0, 0]);
  await browser.shot(page, `${shot}-1440px`);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.locator(`[data-testid=${table}]`).waitFor();
  expect(await sideways()).toEqual([0, 0, 0]);
  await browser.shot(page, `${shot}-390px`);
}
