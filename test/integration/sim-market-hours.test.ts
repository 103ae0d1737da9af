// SIM_MARKET_HOURS=always (the embedded simulator) and `npm run sim -- --market-hours always` (the
// simulator process): every symbol quotes and trades around the clock, whatever the weekday, and
// the sessions the gateway reports agree. Nothing here asserts "closed" (that depends on the wall
// clock's weekday): test/unit/sim-market-hours.test.ts does, on a manual clock.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BridgeBrokerConnection } from '../../src/broker/bridge.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { checkBrokerConfig } from '../../src/startupChecks.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { builtEntry } from '../helpers/build.js';

const FULL_WEEK = Array.from({ length: 7 }, () => [{ fromMin: 0, toMin: 1440 }]);

describe('a gateway with SIM_MARKET_HOURS=always', () => {
  let t: TestGateway;
  let key: string;
  const api = (path: string) => t.req('GET', path, { headers: { 'x-api-key': key } });
  beforeAll(async () => {
    // Only the setting under test from loadConfig: its whole result has dataDir './data', the
    // checkout's own (it ran on the data of a gateway started there with npm start, or failed with 4).
    t = await startTestGateway({ simMarketHours: loadConfig({ SIM_MARKET_HOURS: 'always' }).simMarketHours, host: '127.0.0.1', port: 0, shards: 1, logLevel: 'silent' });
    key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'hours' } })).body.key;
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  it.each([['Sim-P5-Demo'], ['Sim-P4-Demo']])('%s: EURUSD, USDJPY and US500 trade and quote now, and their sessions say always', async (server) => {
    const c = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `hours-${server}`, password: 'pw', server } });
    expect(c.status, c.text).toBe(200);
    const id = c.body.id as string;
    for (const symbol of ['EURUSD', 'USDJPY', 'US500']) {
      const volume = symbol === 'US500' ? 0.1 : 0.01;
      const o = await api(`/OrderSend?id=${id}&symbol=${symbol}&operation=Buy&volume=${volume}`);
      expect(o.status, `${symbol}: ${o.text}`).toBe(200);
      expect((await api(`/IsTradeSession?id=${id}&symbol=${symbol}`)).body).toEqual({ symbol, open: true });
      expect((await api(`/IsQuoteSession?id=${id}&symbol=${symbol}`)).body).toEqual({ symbol, open: true });
      const info = (await api(`/SymbolParams?id=${id}&symbol=${symbol}`)).body.symbolInfo;
      expect([info.tradeSessions, info.quoteSessions]).toEqual([FULL_WEEK, FULL_WEEK]);
    }
  });
});

it('SIM_MARKET_HOURS: sessions or always; anything else, or set in bridge mode, is a configuration error', () => {
  expect(loadConfig({}).simMarketHours).toBeUndefined();
  expect(loadConfig({ SIM_MARKET_HOURS: 'sessions' }).simMarketHours).toBe('sessions');
  expect(() => loadConfig({ SIM_MARKET_HOURS: 'weekends' })).toThrow(ConfigError);
  expect(() => loadConfig({ SIM_MARKET_HOURS: 'weekends' })).toThrow(/simMarketHours: .*"sessions"\|"always"/);
  // Bridge mode: the simulator process keeps its own hours; the setting would do nothing.
  const bridge = loadConfig({ BROKER_MODE: 'bridge', BRIDGE_URL: 'tcp://127.0.0.1:1', SIM_MARKET_HOURS: 'always' });
  expect(() => checkBrokerConfig(bridge)).toThrow(/SIM_MARKET_HOURS is for the embedded simulator; .*npm run sim -- --market-hours always/);
  expect(() => checkBrokerConfig(loadConfig({ SIM_MARKET_HOURS: 'always' }))).not.toThrow();
});

it('npm run sim -- --market-hours always (the compiled build): a bridge client trades EURUSD now', async () => {
  const child = spawn(process.execPath, [builtEntry('src/simServer.ts'), '--port', '0', '--market-hours', 'always'], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const first = await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve));
    const { listening, marketHours } = JSON.parse(first) as { listening: number; marketHours: string };
    expect(marketHours).toBe('always');
    const c = new BridgeBrokerConnection({ host: '127.0.0.1', port: listening, server: 'Sim-P5-Demo', login: '901', password: 'x' });
    await c.connect();
    expect(await c.orderSend({ symbol: 'EURUSD', type: 'Buy', volume: 0.01 })).toMatchObject({ ok: true });
    expect((await c.symbol('GBPUSD'))!.tradeSessions).toEqual(FULL_WEEK);
    await c.disconnect();
  } finally {
    child.kill('SIGTERM');
  }
});
