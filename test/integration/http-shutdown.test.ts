// Shutdown over real sockets, with the gateway as its own process (issue 14 item 4): a SIGTERM that
// lands among 50 concurrent orders answers every connection the kernel accepted, whether its
// request was in flight (its reply), queued behind the signal (503 SERVICE_UNAVAILABLE with
// retry-after) or still in the accept backlog (accepted and answered 503); none is reset, and no
// order executes without its answer (docs/http.md).
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway } from '../helpers/gateway.js';
import { cleanupProcesses, startProcess as spawnGateway, tempDir } from '../helpers/process.js';
import { DRAIN_QUIET_MS } from '../../src/http/drain.js';
import { parseResponses, rawConnect, rawGet, type RawConnection, type RawResponse } from '../helpers/rawHttp.js';
import { until } from '../helpers/until.js';

const KEY = 'shutdown-test-management-key-0123456789';
afterEach(cleanupProcesses);

async function startProcess(dataDir: string) {
  const p = spawnGateway({ GATEWAY_MANAGEMENT_KEY: KEY, DRAIN_TIMEOUT_MS: '5000' }, dataDir);
  const port = Number(new URL(await p.listening).port);
  return { ...p, port };
}

async function call(port: number, method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { 'content-type': 'application/json', ...headers }, ...(body ? { body: JSON.stringify(body) } : {}) });
  return (await r.json()) as any;
}

/** Started again on the same data: the orders at the broker are exactly the `answered` ones. */
async function expectOrdersAfterRestart(dataDir: string, id: string, key: string, answered: number[]) {
  const again = await startProcess(dataDir);
  const tickets = (await call(again.port, 'GET', `/OpenedOrdersTickets?id=${id}`, { 'x-api-key': key })) as number[];
  expect([...tickets].sort()).toEqual([...answered].sort());
  again.child.kill('SIGTERM');
  expect(await again.exited).toBe(0);
}

/** How each connection ended ('end' or 'reset') once it got `n` responses or closed, and what it got. */
const endings = (conns: Array<Promise<RawConnection>>, n: number) => Promise.all(conns.map(async (cp) => {
  const c = await cp;
  const how = await Promise.race([c.waitFor(n).then(() => c.closed), c.closed]);
  return { how, responses: c.responses };
}));

describe('shutdown', () => {
  it('SIGTERM 5 ms after 50 concurrent orders: every connection is answered (200, or 503 with retry-after and connection: close), none reset; each 200 is an order, no other order exists', async () => {
    const dataDir = tempDir('tagw-shutdown-');
    const p = await startProcess(dataDir);
    const mk = { authorization: `Bearer ${KEY}` };
    const key = (await call(p.port, 'POST', '/v1/keys', mk, { label: 'shutdown' })).key as string;
    const id = (await call(p.port, 'POST', '/ConnectEx', { 'x-api-key': key }, { user: 'shut', password: 'pw', server: 'Sim-P5-Demo' })).id as string;
    expect(id).toBeTruthy();

    const conns: Array<Promise<RawConnection>> = [];
    const send = (i: number) =>
      conns.push(rawConnect(p.port).then((c) => {
        c.write(rawGet(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=shut-${i}`, { 'x-api-key': key }));
        return c;
      }));
    // A keep-alive connection that asks again once the gateway is draining.
    const kept = await rawConnect(p.port);
    kept.write(rawGet('/healthz'));
    await kept.waitFor(1);
    for (let i = 0; i < 50; i++) send(i);
    // Every request written before the signal: a test process starved by a loaded machine could
    // otherwise still be connecting when the gateway, having drained, stops accepting.
    await Promise.all(conns);
    await new Promise((r) => setTimeout(r, 5));
    p.child.kill('SIGTERM');
    while (!p.output().includes('shutting down')) await new Promise((r) => setTimeout(r, 5));
    kept.write(rawGet('/healthz'));
    const outcomes = await endings(conns, 1);
    expect(await p.exited).toBe(0);
    expect(outcomes.filter((o) => o.how === 'reset')).toHaveLength(0);
    expect(outcomes.filter((o) => o.responses.length !== 1).map((o) => o.responses.length)).toEqual([]);
    const statuses = outcomes.map((o) => o.responses[0]!.status);
    expect(statuses.every((s) => s === 200 || s === 503), JSON.stringify(statuses)).toBe(true);
    for (const o of outcomes.filter((x) => x.responses[0]!.status === 503)) {
      expect(o.responses[0]!.json).toMatchObject({ error: 'SERVICE_UNAVAILABLE' });
      expect(Number(o.responses[0]!.headers['retry-after'])).toBeGreaterThan(0);
    }
    const [, late] = await kept.waitFor(2);
    expect(late!.status).toBe(503);
    expect(late!.headers.connection).toBe('close');
    expect(late!.headers['retry-after']).toBe('2');
    expect(await kept.closed).toBe('end');
    const answered = outcomes.filter((o) => o.responses[0]!.status === 200).map((o) => o.responses[0]!.json.ticket as number);

    await expectOrdersAfterRestart(dataDir, id, key, answered);
  }, 60_000);

  it('the pipelining port too: SIGTERM among 25 connections of 2 pipelined orders each answers every request (200, or 503 not run), none reset; each 200 is an order, no other', async () => {
    const dataDir = tempDir('tagw-shutdown-pipe-');
    const p = spawnGateway({ GATEWAY_MANAGEMENT_KEY: KEY, DRAIN_TIMEOUT_MS: '5000', HTTP_PIPELINING_PORT: '0' }, dataDir);
    const port = Number(new URL(await p.listening).port);
    await until(() => /"msg":"pipelining listener"/.test(p.output()), 'the pipelining listener');
    const pipePort = Number(new URL(/"msg":"pipelining listener","url":"([^"]+)"/.exec(p.output())![1]!).port);
    const mk = { authorization: `Bearer ${KEY}` };
    const key = (await call(port, 'POST', '/v1/keys', mk, { label: 'shutdown-pipe' })).key as string;
    const id = (await call(port, 'POST', '/ConnectEx', { 'x-api-key': key }, { user: 'shut-pipe', password: 'pw', server: 'Sim-P5-Demo' })).id as string;
    const order = (coid: string) => rawGet(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${coid}`, { 'x-api-key': key });

    const kept = await rawConnect(pipePort);
    kept.write(rawGet('/healthz'));
    await kept.waitFor(1);
    const conns = Array.from({ length: 25 }, (_, i) => rawConnect(pipePort).then((c) => {
      c.write(order(`sp-${i}-a`) + order(`sp-${i}-b`));
      return c;
    }));
    await Promise.all(conns); // every request written before the signal (see the test above)
    await new Promise((r) => setTimeout(r, 5));
    p.child.kill('SIGTERM');
    await until(() => p.output().includes('shutting down'), 'the shutdown to start');
    kept.write(rawGet('/healthz') + rawGet('/healthz'));
    const outcomes = await endings(conns, 2);
    expect(await p.exited).toBe(0);
    expect(outcomes.filter((o) => o.how === 'reset')).toHaveLength(0);
    expect(outcomes.filter((o) => o.responses.length !== 2).map((o) => o.responses.length)).toEqual([]);
    for (const o of outcomes) {
      const statuses = o.responses.map((r) => r.status);
      // Once one was turned away, the one behind it did not run either.
      expect([[200, 200], [200, 503], [503, 503]], JSON.stringify(statuses)).toContainEqual(statuses);
      for (const r of o.responses.filter((x) => x.status === 503)) {
        expect(r.json).toMatchObject({ error: 'SERVICE_UNAVAILABLE' });
        expect(r.headers['retry-after']).toBe('2');
      }
      expect(o.responses[1]!.headers.connection === 'close' || o.responses[0]!.status === 200).toBe(true);
    }
    // The kept connection's two requests sent while draining: 503 (the second one, if Node read it
    // before the first answer closed the connection, 503 not run), then FIN.
    expect(await kept.closed).toBe('end');
    const late = kept.responses.slice(1);
    expect(late.length).toBeGreaterThan(0);
    expect(late.map((r) => r.status)).toEqual(late.map(() => 503));
    expect(late.at(-1)!.headers.connection).toBe('close');
    const answered = outcomes.flatMap((o) => o.responses.filter((r) => r.status === 200).map((r) => r.json.ticket as number));

    await expectOrdersAfterRestart(dataDir, id, key, answered);
  }, 60_000);

  // In the gateway's own process, to put connections into the accept backlog for certain: this
  // thread (the gateway's) is blocked while a worker thread connects and sends, then shuts down.
  it('connections waiting in the accept backlog when shutdown begins are accepted and answered 503, not reset', async () => {
    const t = await startTestGateway();
    try {
      const n = 25;
      const client = backlogClient(t.gw.port, n, rawGet('/healthz'));
      client.go();
      client.waitSent();
      const closing = t.gw.close();
      const outcomes = await client.results;
      await closing;
      expect(outcomes.filter((o) => o.how === 'reset')).toEqual([]);
      for (const o of outcomes) {
        expect(o.data).toMatch(/^HTTP\/1\.1 503/);
        expect(o.data.toLowerCase()).toContain('retry-after: 2');
      }
    } finally {
      await t.stop();
    }
  }, 30_000);

  // The pipelining port accepts one connection per turn of the event loop (Node's), so a backlog
  // takes as many turns to empty; on a loaded machine the gateway can be off the CPU for longer than
  // the drain's quiet period while connections wait there. Here the gateway's thread is blocked right
  // after the shutdown began, while a worker thread connects and sends two pipelined requests on
  // each connection, and until the quiet period has passed.
  it('the pipelining port: connections still in its accept backlog when the drain ends are accepted, and each pipelined request answered 503 (not run), none reset', async () => {
    const t = await startTestGateway({ pipeliningPort: 0 });
    try {
      const n = 25;
      const client = backlogClient(t.gw.pipeliningPort!, n, rawGet('/healthz') + rawGet('/healthz'));
      const closing = t.gw.close();
      const began = Date.now();
      await new Promise<void>((resolve) => setImmediate(() => {
        client.go();
        client.waitSent();
        while (Date.now() - began <= DRAIN_QUIET_MS) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        resolve();
      }));
      const outcomes = await client.results;
      await closing;
      expect(outcomes.filter((o) => o.how !== 'end').map((o) => `${o.how}: ${o.data}`)).toEqual([]);
      for (const o of outcomes) {
        const rs: RawResponse[] = [];
        expect(parseResponses(Buffer.from(o.data, 'latin1'), rs).length, o.data).toBe(0);
        expect(rs.map((r) => r.status), o.data).toEqual([503, 503]);
        for (const r of rs) {
          expect(r.json).toMatchObject({ error: 'SERVICE_UNAVAILABLE' });
          expect(r.headers['retry-after']).toBe('2');
        }
        expect(rs[1]!.headers.connection).toBe('close');
      }
    } finally {
      await t.stop();
    }
  }, 30_000);
});

/**
 * A worker thread that, once `go()` was called, connects n sockets to `port` and writes `request`
 * on each; `waitSent()` blocks the calling thread (the gateway's, when it runs in this process)
 * until every one was written. `results`: how each connection ended and every byte it received.
 */
function backlogClient(port: number, n: number, request: string) {
  const ctl = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(BACKLOG_CLIENT, { eval: true, workerData: { port, n, ctl, request } });
  const results = new Promise<Array<{ how: string; data: string }>>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    results,
    go() {
      Atomics.store(ctl, 1, 1);
      Atomics.notify(ctl, 1);
    },
    waitSent() {
      while (Atomics.load(ctl, 0) < n) Atomics.wait(ctl, 0, Atomics.load(ctl, 0), 100);
    },
  };
}

/** Waits for ctl[1], connects n sockets, writes the request on each, counts them in ctl[0]; reports how each ended. */
const BACKLOG_CLIENT = `
const net = require('node:net');
const { workerData, parentPort } = require('node:worker_threads');
const { port, n, ctl, request } = workerData;
while (Atomics.load(ctl, 1) === 0) Atomics.wait(ctl, 1, 0);
const outcomes = [];
for (let i = 0; i < n; i++) {
  const s = net.connect(port, '127.0.0.1', () => {
    s.write(request);
    Atomics.add(ctl, 0, 1);
    Atomics.notify(ctl, 0);
  });
  let data = '';
  let how = 'end';
  s.on('data', (d) => { data += d.toString('latin1'); });
  s.on('error', (e) => { how = e.code === 'ECONNRESET' ? 'reset' : e.code; });
  s.on('close', () => {
    outcomes.push({ how, data });
    if (outcomes.length === n) parentPort.postMessage(outcomes);
  });
}
`;
