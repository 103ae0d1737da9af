// WebSocket upgrades completed from async code, after an await: /v1/stream's first socket of an
// account whose server this node has not seen (the shard is asked first), and every /ws upgrade in
// cluster mode (the session may be another node's). On the pinned uWS build such an upgrade, made
// through res.cork(), is closed right after `open` with no frame whenever the handshake said
// `Connection: close` (uWebSockets issue 1928; ResponseSink.upgradeLater says why). Such handshakes
// are refused up front with 400 (RFC 6455 asks for `Connection: Upgrade`), so no socket the gateway
// upgrades is closed under its client. Raw TCP clients: `ws` always sends `Connection: Upgrade`.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKey } from '../../src/auth/keys.js';
import { SUBJECTS } from '../../src/cluster/subjects.js';
import { handleHash } from '../../src/http/routes/gateway.js';
import { seedBoundAccount, useClusterEngines } from '../helpers/cluster.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { poisonHeapDuringOpen } from '../helpers/heapPoison.js';
import { rawUpgrade, type RawUpgrade } from '../helpers/rawWs.js';
import { until } from '../helpers/until.js';

const UPGRADES = 20;

/** tagw_ws_upgrades_unanchored_total: upgrades from async code made without the cork anchor. */
async function unanchoredUpgrades(g: TestGateway): Promise<number> {
  const m = /^tagw_ws_upgrades_unanchored_total (\d+)$/m.exec((await g.req('GET', '/metrics', { headers: mgmt(g.managementKey) })).text);
  if (!m) throw new Error('no tagw_ws_upgrades_unanchored_total in /metrics');
  return Number(m[1]);
}

/**
 * `n` first /v1/stream sockets of fresh accounts on `g`, each upgraded after the shard answers
 * (the server forgotten before each), with the heap poisoned while they open: what each came to.
 * Upgrades made without the anchor must not have happened meanwhile (the metric).
 */
async function poisonedFirstSockets(g: TestGateway, apiKey: string, n: number): Promise<string[]> {
  const h = mgmt(g.managementKey);
  // The first socket of an account whose server this node has not seen is upgraded after the shard
  // answers; forgetting the server makes each of these such a first socket.
  const servers = (g.gw.stream as unknown as { topics: { servers: Map<string, unknown> } }).topics.servers;
  const undo = poisonHeapDuringOpen(g.gw.stream, 'onOpen');
  const s0 = g.gw.stream.stats();
  const unanchored = await unanchoredUpgrades(g);
  const outcomes: string[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const acc = (await g.req('POST', '/ConnectEx', { headers: h, body: { user: `poisoned-${i}-${randomUUID()}`, password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
      servers.clear();
      const up = await rawUpgrade(g.url, `/v1/stream?id=${acc}&heartbeat=0&apiKey=${apiKey}`);
      // Before the anchor: '101 then closed' for nearly every one (the client's 1006).
      outcomes.push(await outcome(up, (f) => f.includes('"ORDERS"')));
      up.destroy();
    }
  } finally {
    undo();
  }
  expect(g.gw.stream.stats().syncUpgrades).toBe(s0.syncUpgrades);
  expect(await unanchoredUpgrades(g)).toBe(unanchored);
  return outcomes;
}

/** A 101 whose socket stays open: it answers `ping` (/ws) or gets its first frame (/v1/stream). */
async function staysOpen(up: RawUpgrade, first: (text: string) => boolean, what: string): Promise<void> {
  expect(up.status, what).toBe(101);
  await up.waitFor(first, 10_000).catch((err: unknown) => {
    throw new Error(`${what}: ${(err as Error).message}`);
  });
  expect(up.isEnded(), what).toBe(false);
}

/** What a handshake came to: a refusal, or a 101 whose socket then `first` came on or closed. */
async function outcome(up: RawUpgrade, first: (text: string) => boolean): Promise<string> {
  if (up.status !== 101) return `${up.status} ${up.body?.error}`;
  await up.waitFor(first, 3_000).catch(() => undefined);
  return up.isEnded() ? '101 then closed' : '101 open';
}

describe('/v1/stream: the first socket of an account, upgraded after the shard answers', () => {
  let t: TestGateway;
  let key: string;
  let id: string;
  beforeAll(async () => {
    t = await startTestGateway();
    const h = mgmt(t.managementKey);
    id = (await t.req('POST', '/ConnectEx', { headers: h, body: { user: 'async-upgrade', password: 'pw', server: 'Sim-P5-Demo' } })).body.id;
    key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'k' } })).body.key;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('a handshake with Connection: close is refused with 400 before anything is asked; with Connection: Upgrade the socket stays open and streams', async () => {
    const path = `/v1/stream?id=${id}&heartbeat=0&apiKey=${key}`;
    const s0 = t.gw.stream.stats();
    const closing = await rawUpgrade(t.url, path, { connection: 'close' });
    try {
      // Before the fix: '101 then closed' (nothing sent: the client's 1006).
      expect(await outcome(closing, (f) => f.includes('"POSITIONS"'))).toBe('400 BAD_REQUEST');
      expect(closing.body.message).toMatch(/Connection: Upgrade/);
    } finally {
      closing.destroy();
    }
    const up = await rawUpgrade(t.url, path);
    try {
      await staysOpen(up, (f) => f.includes('"POSITIONS"'), 'the first socket');
      // It was the async path (the shard was asked before the upgrade), not the synchronous one.
      expect(t.gw.stream.stats().syncUpgrades).toBe(s0.syncUpgrades);
    } finally {
      up.destroy();
    }
  });

  it(`${UPGRADES} first sockets with the heap poisoned while they open: each stays open and streams (the cork anchor)`, async () => {
    expect(await poisonedFirstSockets(t, key, UPGRADES)).toEqual(Array(UPGRADES).fill('101 open'));
  }, 60_000);

  it('the gateways of one thread share the anchor: it outlives the first to stop, and a gateway started after the last stopped makes a new one', async () => {
    const a = await startTestGateway();
    const b = await startTestGateway();
    let c: TestGateway | undefined;
    try {
      const keyOf = async (g: TestGateway) => (await g.req('POST', '/v1/keys', { headers: mgmt(g.managementKey), body: { label: 'k' } })).body.key as string;
      const keyB = await keyOf(b);
      await a.stop();
      expect(await poisonedFirstSockets(b, keyB, 5)).toEqual(Array(5).fill('101 open'));
      await b.stop();
      await t.stop(); // the suite's gateway too: no holder left in this thread, so the anchor closes
      c = await startTestGateway();
      expect(await poisonedFirstSockets(c, await keyOf(c), 5)).toEqual(Array(5).fill('101 open'));
    } finally {
      await c?.stop();
      t = await startTestGateway(); // for afterAll, as the suite started it
    }
  }, 60_000);
});

describe('/ws in cluster mode: every upgrade waits for the session lookup and the relay', () => {
  const engines = useClusterEngines();
  const apiKey = generateKey('api');
  const account = randomUUID();
  const secretKey = randomBytes(32);
  let node: TestGateway;
  let handle: string;
  beforeAll(async () => {
    await seedBoundAccount(engines.tenancy, { apiKey, account, login: 'async-ws', secretKey });
    node = await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId: 'node-ws', secretKey: secretKey.toString('hex'),
      clusterLeaseMs: 6_000,
    });
    await until(() => node.gw.cluster!.owned().includes(account), 'the node to own the account');
    await until(async () => (await node.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the account to connect');
    const made = await node.req('POST', '/v1/connect', { headers: { 'x-api-key': apiKey.value }, body: { brokerAccountId: account } });
    expect(made.status).toBe(200);
    handle = made.body.handle as string;
  }, 60_000);
  afterAll(async () => {
    await node?.stop();
  });

  it(`${UPGRADES} upgrades in a row, each the handle's only socket, stay open and answer ping; ${UPGRADES} with Connection: close are refused with 400, none upgraded and closed`, async () => {
    const path = `/ws?handle=${encodeURIComponent(handle)}&apiKey=${apiKey.value}`;
    const subject = SUBJECTS.accountAll(handleHash(handle));
    // With another socket of the handle open the relay follows it already, and the upgrade is done
    // in the microtasks of uWS's upgrade handler: only the handle's first socket is truly async.
    const followed = () => node.gw.cluster!.relay.following().has(subject);
    const alone = async (what: string) => {
      await until(() => !followed(), `${what}: the handle no longer followed (its sockets closed)`);
    };
    const outcomes: string[] = [];
    for (let i = 0; i < UPGRADES; i++) {
      await alone(`close ${i + 1}`);
      const up = await rawUpgrade(node.url, path, { connection: 'close' });
      if (up.status === 101) up.sendText('ping');
      outcomes.push(await outcome(up, (f) => f.includes('"PONG"')));
      up.destroy();
    }
    // Before the fix: '101 then closed' every time (the client's 1006).
    expect(outcomes).toEqual(Array(UPGRADES).fill('400 BAD_REQUEST'));
    for (let i = 0; i < UPGRADES; i++) {
      await alone(`upgrade ${i + 1}`);
      const up = await rawUpgrade(node.url, path);
      try {
        up.sendText('ping');
        await staysOpen(up, (f) => f.includes('"PONG"'), `upgrade ${i + 1}`);
        expect(followed()).toBe(true);
      } finally {
        up.destroy();
      }
    }
  }, 90_000);

  it(`${UPGRADES} upgrades with the heap poisoned while they open: each stays open and answers ping (the cork anchor)`, async () => {
    const path = `/ws?handle=${encodeURIComponent(handle)}&apiKey=${apiKey.value}`;
    const subject = SUBJECTS.accountAll(handleHash(handle));
    const undo = poisonHeapDuringOpen(node.gw.gatewaySocket, 'onOpen');
    const unanchored = await unanchoredUpgrades(node);
    const outcomes: string[] = [];
    try {
      for (let i = 0; i < UPGRADES; i++) {
        await until(() => !node.gw.cluster!.relay.following().has(subject), `upgrade ${i + 1}: the handle no longer followed`);
        const up = await rawUpgrade(node.url, path);
        up.sendText('ping');
        outcomes.push(await outcome(up, (f) => f.includes('"PONG"')));
        up.destroy();
      }
    } finally {
      undo();
    }
    // Before the anchor: '101 then closed' for nearly every one (the client's 1006).
    expect(outcomes).toEqual(Array(UPGRADES).fill('101 open'));
    expect(await unanchoredUpgrades(node)).toBe(unanchored);
  }, 90_000);
});
