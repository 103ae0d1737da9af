// Contract of the most used classic routes: real responses of a real gateway (uWS, shard workers,
// embedded simulator) over real HTTP, on a P5 and a P4 account, must pass the `response` schema
// attached to each route (strict objects: an undocumented or renamed field fails), carry the ISO
// sibling of every ...TimeMsc field, and /openapi.json must document that same schema.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AnyRoute } from '../../src/http/route.js';
import { DealSchema, OrderSchema, PositionSchema } from '../../src/http/routes/classicResponses.js';
import { ErrorBody } from '../../src/http/schemas.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const COVERED = [
  'AccountSummary', 'GetQuote', 'OpenedOrders', 'OrderHistory', 'Symbols', 'SymbolParams',
  'OrderSend', 'OrderModify', 'OrderClose', 'OrderDelete', 'OrderCloseBy',
] as const;
type Covered = (typeof COVERED)[number];

let t: TestGateway;
let key: string;
const ids: Record<'P4' | 'P5', string> = { P4: '', P5: '' };
/** Every response checked, per route and platform (the openapi and coverage tests read them). */
const seen = new Map<string, unknown[]>();

const routeOf = (name: Covered): AnyRoute => {
  const r = t.gw.routes.find((x) => x.path === `/${name}` && x.method === 'get');
  if (!r) throw new Error(`no route /${name}`);
  return r;
};

/** Every `...TimeMsc`/`timeMsc` has its ISO sibling without Msc, every `expiration` > 0 its
 *  `expirationTime`, and every ISO field its epoch source. */
function checkUtcSiblings(v: unknown, at = '$'): void {
  if (Array.isArray(v)) return v.forEach((x, i) => checkUtcSiblings(x, `${at}[${i}]`));
  if (v === null || typeof v !== 'object') return;
  const o = v as Record<string, unknown>;
  for (const [k, x] of Object.entries(o)) {
    if (typeof x === 'object') checkUtcSiblings(x, `${at}.${k}`);
    if ((k === 'timeMsc' || k.endsWith('TimeMsc')) && typeof x === 'number') {
      expect(o[k.slice(0, -3)], `${at}.${k.slice(0, -3)}`).toBe(new Date(x).toISOString());
    }
    if (k === 'expiration' && typeof x === 'number' && x > 0) expect(o.expirationTime, `${at}.expirationTime`).toBe(new Date(x).toISOString());
    if (k === 'expirationTime') expect(o.expiration, `${at}.expiration`).toBeGreaterThan(0);
    else if ((k === 'time' || k.endsWith('Time')) && typeof x === 'string') expect(typeof o[`${k}Msc`], `${at}.${k}Msc`).toBe('number');
  }
}

async function call(platform: 'P4' | 'P5', route: Covered, query = ''): Promise<any> {
  const r = await t.req('GET', `/${route}?id=${ids[platform]}${query}`, { headers: { 'x-api-key': key } });
  expect(r.status, `${platform} /${route}${query}: ${r.text}`).toBe(200);
  const schema = routeOf(route).response;
  expect(schema, `/${route} declares a response schema`).toBeDefined();
  const parsed = schema!.safeParse(r.body);
  expect(parsed.success, `${platform} /${route}${query} does not match its response schema: ${parsed.error ? z.prettifyError(parsed.error) : ''}\n${r.text}`).toBe(true);
  checkUtcSiblings(r.body);
  seen.set(`${platform} ${route}`, [...(seen.get(`${platform} ${route}`) ?? []), r.body]);
  return r.body;
}

beforeAll(async () => {
  t = await startTestGateway({ seatBuildMs: 600_000 });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'contract' } })).body.key;
  for (const [platform, server] of [['P5', 'Sim-P5-Demo'], ['P4', 'Sim-P4-Demo']] as const) {
    const a = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `contract-${platform}`, password: 'pw', server } });
    expect(a.status, a.text).toBe(200);
    ids[platform] = a.body.id;
  }
}, 60_000);
afterAll(async () => {
  await t?.stop();
});

describe.each(['P5', 'P4'] as const)('classic responses on %s match their schemas', (platform) => {
  it('account, quote and symbol routes', async () => {
    const s = await call(platform, 'AccountSummary');
    expect(s.synced).toBe(true);
    const q = await call(platform, 'GetQuote', '&symbol=BTCUSD&cached=0');
    expect(q.symbol).toBe('BTCUSD');
    const symbols = await call(platform, 'Symbols');
    expect(symbols.length).toBeGreaterThan(1);
    const sp = await call(platform, 'SymbolParams', '&symbol=EURUSD');
    expect(sp.symbolInfo.name).toBe('EURUSD');
  });

  it('trading routes, then open orders and history', async () => {
    const q = await call(platform, 'GetQuote', '&symbol=BTCUSD&cached=0');
    const fill = await call(platform, 'OrderSend', `&symbol=BTCUSD&operation=Buy&volume=0.02&stoploss=${Math.round(q.bid * 0.5)}&comment=contract&magic=7&clientOrderId=contract-${platform}-1`);
    expect(fill.state).toBe('filled');
    expect(fill.deals).toHaveLength(1);
    const sell = await call(platform, 'OrderSend', '&symbol=BTCUSD&operation=Sell&volume=0.01');
    const pending = await call(platform, 'OrderSend', `&symbol=BTCUSD&operation=BuyLimit&volume=0.01&price=${Math.round(q.ask * 0.8)}&expiration=2030-01-01T00:00:00`);
    expect(pending).toMatchObject({ state: 'placed', deals: [], expirationTime: '2030-01-01T00:00:00.000Z' });
    if (platform === 'P5') {
      const sl = await call(platform, 'OrderSend', `&symbol=BTCUSD&operation=BuyStopLimit&volume=0.01&price=${Math.round(q.ask * 1.2)}&stopLimitPrice=${Math.round(q.ask * 1.1)}`);
      expect(sl.stopLimitPrice).toBe(Math.round(q.ask * 1.1));
    }
    await call(platform, 'AccountSummary');

    const opened = await call(platform, 'OpenedOrders');
    expect(opened.map((x: { kind: string }) => x.kind)).toEqual(expect.arrayContaining(['position', 'order']));

    await call(platform, 'OrderModify', `&ticket=${pending.ticket}&price=${Math.round(q.ask * 0.75)}`);
    await call(platform, 'OrderModify', `&ticket=${fill.positionId}&takeprofit=${Math.round(q.ask * 1.5)}`);
    const part = await call(platform, 'OrderClose', `&ticket=${fill.positionId}&lots=0.01`);
    // P4 re-tickets the rest of a partly closed ticket ("to #new"); P5 keeps the position id.
    const rest = platform === 'P4' ? Number(/to #(\d+)/.exec(part.comment)![1]) : fill.positionId;
    await call(platform, 'OrderCloseBy', `&ticket=${rest}&byTicket=${sell.positionId}`);
    const other = await call(platform, 'OrderSend', '&symbol=BTCUSD&operation=Sell&volume=0.01');
    await call(platform, 'OrderClose', `&ticket=${other.positionId}`);
    const del = await call(platform, 'OrderDelete', `&ticket=${pending.ticket}`);
    expect(del.state).toBe('cancelled');

    const h = await call(platform, 'OrderHistory', '&from=2020-01-01T00:00:00');
    expect(h.orders.length).toBeGreaterThan(0);
    expect(h.deals.some((d: { entry: string }) => d.entry === 'out')).toBe(true);
  });
});

describe('the contract itself', () => {
  it('/openapi.json documents the response schema of every covered route', async () => {
    const doc = (await t.req('GET', '/openapi.json')).body;
    for (const name of COVERED) {
      const documented = doc.paths[`/${name}`]?.get?.responses?.['200']?.content?.['application/json']?.schema;
      expect(documented, `/${name} in /openapi.json`).toBeDefined();
      expect(documented, `/${name}`).toEqual(z.toJSONSchema(routeOf(name).response!, { io: 'output', unrepresentable: 'any', target: 'openapi-3.0' }));
    }
    const send = doc.paths['/OrderSend'].get.responses['200'].content['application/json'].schema;
    expect(send.additionalProperties).toBe(false);
    expect(Object.keys(send.properties)).toEqual(expect.arrayContaining(['ticket', 'state', 'openTimeMsc', 'openTime', 'retcode', 'deals']));
  });

  it('a broker rejection (400 TRADE_REQUEST_ERROR) matches the documented Error schema, reason and retcode included', async () => {
    const doc = (await t.req('GET', '/openapi.json')).body;
    const documented = doc.paths['/OrderClose'].get.responses['400'].content['application/json'].schema;
    expect(documented).toEqual({ $ref: '#/components/schemas/Error' });
    expect(Object.keys(doc.components.schemas.Error.properties)).toEqual(expect.arrayContaining(['error', 'message', 'reason', 'retcode']));
    for (const p of ['P4', 'P5'] as const) {
      const r = await t.req('GET', `/OrderClose?id=${ids[p]}&ticket=999999999`, { headers: { 'x-api-key': key } });
      expect(r.status, r.text).toBe(400);
      expect(r.body).toMatchObject({ error: 'TRADE_REQUEST_ERROR', reason: 'INVALID_TICKET', retcode: 10036 });
      // The documented keys, nothing else.
      expect(ErrorBody.strict().safeParse(r.body).success, r.text).toBe(true);
    }
  });

  it('every covered route was checked on both platforms', () => {
    for (const name of COVERED) for (const p of ['P4', 'P5']) expect(seen.get(`${p} ${name}`)?.length, `${p} /${name}`).toBeGreaterThan(0);
  });

  it('every field of the order, position and deal schemas was sent at least once (no field documented under a wrong name)', () => {
    const all = [...seen.values()].flat();
    const objects: Record<string, unknown>[] = [];
    const walk = (v: unknown) => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        objects.push(v as Record<string, unknown>);
        Object.values(v).forEach(walk);
      }
    };
    walk(all);
    const keysOf = (pred: (o: Record<string, unknown>) => boolean) => new Set(objects.filter(pred).flatMap((o) => Object.keys(o)));
    const orderKeys = keysOf((o) => o.kind === 'order');
    const positionKeys = keysOf((o) => o.kind === 'position');
    const dealKeys = keysOf((o) => 'entry' in o && 'position' in o);
    for (const k of Object.keys(OrderSchema.shape)) expect(orderKeys, `order.${k}`).toContain(k);
    for (const k of Object.keys(PositionSchema.shape)) expect(positionKeys, `position.${k}`).toContain(k);
    for (const k of Object.keys(DealSchema.shape)) expect(dealKeys, `deal.${k}`).toContain(k);
  });

  it('a renamed or extra field fails the schemas (strict objects)', () => {
    const fill = (seen.get('P5 OrderSend') as Record<string, unknown>[])[0]!;
    const schema = routeOf('OrderSend').response!;
    expect(schema.safeParse(fill).success).toBe(true);
    const { openTime, ...renamed } = fill;
    expect(schema.safeParse({ ...renamed, openTimeUtc: openTime }).success).toBe(false);
    expect(schema.safeParse({ ...fill, extra: 1 }).success).toBe(false);
    const deals = fill.deals as Record<string, unknown>[];
    const { time, ...deal } = deals[0]!;
    expect(schema.safeParse({ ...fill, deals: [{ ...deal, dealTime: time }] }).success).toBe(false);
    const summary = (seen.get('P4 AccountSummary') as Record<string, unknown>[])[0]!;
    const { freeMargin, ...s } = summary;
    expect(routeOf('AccountSummary').response!.safeParse({ ...s, marginFree: freeMargin }).success).toBe(false);
  });
});
