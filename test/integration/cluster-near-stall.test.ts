// A near source that stops delivering while its broker session stays up (docs/cluster.md "Streams",
// quiet relays). Node b follows account X (owned by node a) and runs account Y of the same server: Y's
// session serves X's quotes on b, b tells the owners it is quiet for the symbol and a withholds the
// relay's copies, sending pulses instead. Then Y's session is muted at the simulator (connected,
// answering, no ticks): b must notice from a's pulses, ask for the relay's copies again, and its
// socket keep getting quotes; once Y delivers again, b is quiet again. Real nats-server, PostgreSQL,
// one simulator over loopback TCP, two in-process gateways.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { SecretBox } from '../../src/crypto/secretBox.js';
import { ownerConnected, seedBoundAccount, useClusterEngines } from '../helpers/cluster.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { mustOpen, type Frame, type StreamClient } from '../helpers/stream-helpers.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
const secretKey = randomBytes(32);
const apiKey = generateKey('api');
const nodes: TestGateway[] = [];
let x = '';
let y = '';
let a: TestGateway;
let b: TestGateway;

async function startNode(nodeId: string): Promise<TestGateway> {
  const gw = await startTestGateway({
    brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 2, secretKey: secretKey.toString('hex'),
    natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId, clusterLeaseMs: 6_000, clusterOwnerWaitMs: 5_000,
  });
  nodes.push(gw);
  return gw;
}

async function metric(node: TestGateway, re: RegExp): Promise<number> {
  return Number(re.exec(await (await fetch(`${node.url}/metrics`)).text())?.[1] ?? 0);
}
const relayedQuotes = (node: TestGateway) => metric(node, /^tagw_stream_quotes_in_total\{path="relay"\} (\d+)/m);

/** No quote twice, and the topic's seqs one after another. */
function expectWhole(quotes: Frame[]): void {
  const keys = quotes.map((f) => JSON.stringify([f.data.bid, f.data.ask, f.data.timeMsc]));
  expect(new Set(keys).size).toBe(keys.length);
  for (let i = 1; i < quotes.length; i++) expect(quotes[i]!.seq).toBe(quotes[i - 1]!.seq + 1);
}

beforeAll(async () => {
  [x, y] = [randomUUID(), randomUUID()];
  await seedBoundAccount(engines.tenancy, { apiKey, account: x, login: 'stall-x', secretKey });
  const now = Date.now();
  await engines.tenancy.insertSeat({ id: y, customer_id: 'c1', private_hosting: 0, region: null, created_at: now });
  await engines.tenancy.upsertSeatState({ seat_id: y, status: 'ACTIVE', ready_at: now, updated_at: now });
  await engines.tenancy.upsertBinding({
    seat_id: y, customer_id: 'c1', platform: 'P5', server: 'Sim-P5-Demo', login: 'stall-y',
    password_enc: new SecretBox(secretKey).seal('pw', y), build: null, created_at: now, updated_at: now,
  });
  await startNode('node-a');
  await startNode('node-b');
  // Two accounts, two nodes: once both are live each holds one (the lease plan's caps), though
  // which one depends on who held what first (the node that started first takes both, then sheds one).
  await until(() => nodes.every((n) => n.gw.cluster!.liveNodes().length === 2 && n.gw.cluster!.owned().length === 1), 'one account on each node', 30_000);
  a = nodes.find((n) => n.gw.cluster!.owned().includes(x))!;
  b = nodes.find((n) => n.gw.cluster!.owned().includes(y))!;
  await ownerConnected(nodes, x, a.gw.cluster!.nodeId);
  await ownerConnected(nodes, y, b.gw.cluster!.nodeId);
}, 120_000);
afterAll(async () => {
  for (const n of nodes) await n.stop().catch(() => undefined);
});

describe('a near source that stops delivering', () => {
  let sock: StreamClient;

  it('serves the symbol on b with the owner\'s copies withheld (pulses instead)', async () => {
    sock = await mustOpen(b.url, { id: x, heartbeat: '0' }, { 'x-api-key': apiKey.value });
    await sock.until((c) => c.of('ORDERS').find((f) => f.data.snapshot === true), 15_000, 'the ORDERS snapshot');
    sock.send({ action: 'subscribe', symbol: 'BTCUSD' });
    await sock.next('SUBSCRIBED', 0, 15_000);
    await until(() => b.gw.cluster!.nearCounts().quiet === 1, 'b quiet for the symbol', 20_000);
    await until(() => a.gw.cluster!.status().relay.withheld >= 5, 'a to withhold five ticks', 20_000);
    const relayed = await relayedQuotes(b);
    const n = sock.of('QUOTE').length;
    await sock.until((c) => c.of('QUOTE').length >= n + 5, 20_000, 'five quotes while quiet');
    // Every one of them from b's own session: none over the relay meanwhile.
    expect(await relayedQuotes(b)).toBe(relayed);
    expect(b.gw.cluster!.status().relay.pulsesIn).toBeGreaterThan(0);
    expectWhole(sock.of('QUOTE'));
  }, 60_000);

  it('muted at the broker (session up, no ticks): b notices from the pulses and the relay\'s copies carry the quotes; unmuted, b is quiet again', async () => {
    const stalls = b.gw.cluster!.nearCounts().stalls;
    const relayed = await relayedQuotes(b);
    const from = sock.of('QUOTE').length;
    const mute = engines.sim.sim.faults.set({ server: 'Sim-P5-Demo', login: 'stall-y', kind: 'mute', durationMs: 120_000 });
    try {
      await until(() => b.gw.cluster!.nearCounts().stalls > stalls, 'b to find its near source behind', 20_000);
      expect(b.gw.cluster!.nearCounts().quiet).toBe(0);
      await until(async () => (await relayedQuotes(b)) >= relayed + 5, 'five quotes over the relay', 20_000);
      const n = sock.of('QUOTE').length;
      await sock.until((c) => c.of('QUOTE').length >= n + 5, 20_000, 'five more quotes at the socket while muted');
      // Y's session never went down: it still answers.
      expect((await b.gw.services.shards.call(y, 'account.status', { accountId: y })).phase).toBe('connected');
    } finally {
      engines.sim.sim.faults.clear(mute.id);
    }
    await until(() => b.gw.cluster!.nearCounts().quiet === 1, 'b quiet again once Y delivers', 20_000);
    const n = sock.of('QUOTE').length;
    await sock.until((c) => c.of('QUOTE').length >= n + 5, 20_000, 'five more quotes after the mute');
    expectWhole(sock.of('QUOTE').slice(from));
    await sock.close();
  }, 90_000);
});
