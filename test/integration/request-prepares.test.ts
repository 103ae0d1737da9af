// The main thread answers every request and prepares no SQL statement per request: a statement is
// compiled once per connection (~10 µs each, ~70 µs for a store's set) and reused. /ConnectEx made
// a new AccountStore three to four times per call, every statement of it prepared again: a ramp of
// 3,000 account creations spent ~200 ms of the main thread preparing them, plus their garbage,
// while the same thread served other customers' quotes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKey } from '../helpers/gateway-helpers.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
let prepared: string[] = [];
const mk = () => ({ authorization: `Bearer ${t.managementKey}` });

beforeAll(async () => {
  t = await startTestGateway();
  const db = t.gw.services.db;
  const prepare = db.prepare.bind(db);
  db.prepare = ((sql: string) => {
    prepared.push(sql.replace(/\s+/g, ' ').slice(0, 80));
    return prepare(sql);
  }) as typeof db.prepare;
});
afterAll(async () => {
  await t.stop();
});

describe('requests on the main thread prepare no statement', () => {
  it('account creation, its repeat, a re-bind, status, quotes, account reads and an account made through the gateway route', async () => {
    const seat = (await t.req('POST', '/v1/seats', { headers: mk(), body: {} })).body.id as string;
    const key = await apiKey(t, seat);
    const h = { 'x-api-key': key };
    let n = 0;
    const round = async () => {
      const login = `prep-${n++}`;
      const made = await t.req('POST', '/ConnectEx', { headers: h, body: { user: login, password: 'pw', server: 'Sim-P5-Demo' } });
      expect(made.status, made.text).toBe(200);
      const id = made.body.id as string;
      const again = await t.req('POST', '/ConnectEx', { headers: h, body: { user: login, password: 'pw', server: 'Sim-P5-Demo' } });
      expect(again.body.id).toBe(id);
      const rebind = await t.req('POST', `/ConnectEx?id=${id}`, { headers: h, body: { user: `${login}-b`, password: 'pw', server: 'Sim-P5-Demo' } });
      expect(rebind.status, rebind.text).toBe(200);
      for (const path of [`/GetQuote?id=${id}&symbol=EURUSD`, `/AccountSummary?id=${id}`, `/OpenedOrders?id=${id}`]) {
        const r = await t.req('GET', path, { headers: h });
        expect(r.status, `${path}: ${r.text}`).toBe(200);
      }
      expect((await t.req('GET', '/v1/status', { headers: mk() })).status).toBe(200);
      const gatewayRoute = await t.req('POST', '/v1/broker-accounts', { headers: h, body: { user: `${login}-g`, password: 'pw', server: 'Sim-P5-Demo', platform: 'P5' } });
      expect(gatewayRoute.status, gatewayRoute.text).toBe(201);
    };
    await round(); // statements a path prepares lazily, once
    prepared = [];
    await round();
    await round();
    expect(prepared).toEqual([]);
  });
});
