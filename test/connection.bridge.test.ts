// BROKER_MODE=bridge: the gateway's account connections go over the bridge protocol to a
// standalone simulator server (real loopback socket), including a dropped socket and its recovery.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadSimConfig } from '../src/sim/config.js';
import { startSimServer, type SimServerHandle } from '../src/sim/server.js';
import { Simulator } from '../src/sim/simulator.js';
import { MemorySimStore } from '../src/store/simStore.js';
import { mgmt, startTestGateway, type TestGateway } from './helpers/gateway.js';

let sim: Simulator;
let bridge: SimServerHandle;
let t: TestGateway;
beforeAll(async () => {
  sim = new Simulator({ config: loadSimConfig(), store: new MemorySimStore() });
  sim.start();
  bridge = await startSimServer(sim, { port: 0, host: '127.0.0.1' });
  t = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: `tcp://127.0.0.1:${bridge.port}` });
}, 30_000);
afterAll(async () => {
  await t?.stop();
  await bridge?.close();
  sim?.stop();
});

it('binds, reads, trades idempotently and survives a dropped bridge socket', async () => {
  const key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'b' } })).body.key;
  const h = { 'x-api-key': key };
  const c = await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'br-1', password: 'pw', server: 'Sim-P4-Demo' } });
  expect(c.status, c.text).toBe(200);
  const id = c.body.id;
  const d = await t.req('GET', `/AccountDetails?id=${id}`, { headers: h });
  expect(d.body).toMatchObject({ platform: 'P4', login: 'br-1' });
  expect((await t.req('GET', `/BalanceHistory?id=${id}`, { headers: h })).status).toBe(501);
  const o = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=br-o1`, { headers: h });
  expect(o.status, o.text).toBe(200);
  bridge.dropAll();
  let again = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=br-o1`, { headers: h });
  for (let i = 0; i < 30 && again.status === 503; i++) {
    await t.req('GET', `/CheckConnect?id=${id}`, { headers: h });
    again = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=br-o1`, { headers: h });
  }
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replay')).toBe('true');
  expect(again.body.ticket).toBe(o.body.ticket);
  expect((await t.req('GET', `/OpenedOrdersTickets?id=${id}`, { headers: h })).body).toEqual([o.body.ticket]);
}, 30_000);
