// The example bot (examples/market-maker.ts) against a real gateway: it quotes, places limit orders
// through the SDK, and leaves none of its orders behind when it stops.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMarketMaker } from '../examples/market-maker.js';
import { tour } from '../examples/tour.js';
import { TagwClient } from '../src/client/index.js';
import { startTestGateway, type TestGateway } from './helpers/gateway.js';

let g: TestGateway;
beforeAll(async () => {
  g = await startTestGateway();
});
afterAll(async () => {
  await g?.stop();
});

describe('examples/tour.ts', () => {
  it('the README tour: key, account, reads, an order, stream frames, a gateway session', async () => {
    const lines: string[] = [];
    const { key, accountId } = await tour(g.url, g.managementKey, (l) => lines.push(l));
    expect(key).toMatch(/^tagw_/);
    expect(lines.join('\n')).toMatch(/balance 10000 USD[\s\S]*order \d+ filled[\s\S]*stream: [\s\S]*gateway session/);
    expect((await new TagwClient({ baseUrl: g.url, apiKey: key }).account(accountId).OpenedOrders()).length).toBe(1);
  });
});

describe('examples/market-maker.ts', () => {
  it('quotes both sides through the SDK and cancels its orders when it stops', async () => {
    const key = (await new TagwClient({ baseUrl: g.url, managementKey: g.managementKey }).keys.create({ label: 'mm' })).key;
    const client = new TagwClient({ baseUrl: g.url, apiKey: key });
    const id = (await client.connectEx({ user: 'mm', password: 'pw', server: 'Sim-P5-Demo' })).id;
    const refusals: string[] = [];
    const summary = await runMarketMaker({ baseUrl: g.url, apiKey: key, accountId: id, runMs: 1_500, log: (m, d) => {
      if (m === 'order refused') refusals.push((d as { code: string }).code);
    } });
    expect(summary.quotes).toBeGreaterThan(0);
    expect(summary.requotes).toBeGreaterThan(0);
    expect(summary.ordersPlaced).toBeGreaterThanOrEqual(2);
    // Only the broker's price rules may refuse one (the market ran through the limit): no request error.
    expect(refusals.filter((c) => c !== 'TRADE_REQUEST_ERROR')).toEqual([]);
    expect(summary.refused).toBe(refusals.length);
    const left = (await client.account(id).OpenedOrders()).filter((r) => r.kind === 'order' && r.magic === 7001 && r.state === 'placed');
    expect(left).toEqual([]);
  });
});
