// A gateway in bridge mode in front of `npm run sim -- --start` (docs/simulator.md, "Starting the
// market at a fixed instant"): the simulator process tells its clock's offset in its hello
// (ServerInfo.clockOffsetMs), so the gateway's market-facing "now" follows it as the embedded
// simulator's does with SIM_START: quote ages, the server time, default history ranges, ClosedOrders
// since a session's connect. The instant is 73 days before this file was written: the same answers
// whatever day it runs.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { builtEntry } from '../helpers/build.js';
import { closedSinceConnect, keyAndAccount, orderInDefaultHistory, quoteAndServerTime, streamOnMarketClock, type MarketClockCase } from '../helpers/simStart.js';

const START = '2026-09-16T12:00:00.000Z'; // a Wednesday: forex open
const START_MS = Date.parse(START);

let sim: ChildProcess;
let t: TestGateway;
let key: string;
let id: string;
let wall0: number;
const simNowAtMost = () => START_MS + (Date.now() - wall0);

beforeAll(async () => {
  wall0 = Date.now();
  sim = spawn(process.execPath, [builtEntry('src/simServer.ts'), '--port', '0', '--start', START], { stdio: ['ignore', 'pipe', 'inherit'] });
  const first = await new Promise<string>((resolve) => createInterface({ input: sim.stdout! }).once('line', resolve));
  const { listening } = JSON.parse(first) as { listening: number };
  t = await startTestGateway({ brokerMode: 'bridge', bridgeUrl: `tcp://127.0.0.1:${listening}` });
  ({ key, id } = await keyAndAccount(t, 'bridge-start'));
}, 60_000);
afterAll(async () => {
  await t?.stop();
  sim?.kill('SIGTERM');
});

const market = (): MarketClockCase => ({ t, key, id, startMs: START_MS, atMost: simNowAtMost });

it('quotes, the server time and the default history range follow --start through the bridge', async () => {
  await quoteAndServerTime(market(), 'EURUSD');
  await orderInDefaultHistory(market());
});

it('a gateway session: ClosedOrders since its connect, on the simulator\'s clock', async () => {
  await closedSinceConnect(market());
});

it('/v1/stream: QUOTE ages true and candles on the simulator\'s clock', async () => {
  await streamOnMarketClock(market());
});
