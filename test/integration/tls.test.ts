// TLS: HTTPS and WSS on the gateway's port, the certificate reloaded on SIGHUP with a WSS socket
// kept open, and the bridge over tls:// with the certificate verified against a pinned CA.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { createServer as createNetServer } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer } from 'node:tls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ConfigError, parseConfig } from '../../src/config.js';
import { startGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/log.js';
import { CHECKPOINT_WORKER, SHARD_WORKER, startTestGateway, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { cleanupProcesses, startProcess, tempDir } from '../helpers/process.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { fingerprintOf, httpsJson, makeCerts, type TestCerts } from '../helpers/tls.js';
import { parseResponses, rawGet, type RawResponse } from '../helpers/rawHttp.js';
import { until } from '../helpers/until.js';

let certs: TestCerts;
let ca: Buffer;
const certDir = mkdtempSync(join(tmpdir(), 'tagw-tls-'));
beforeAll(() => {
  certs = makeCerts(certDir);
  ca = readFileSync(certs.ca);
});
afterAll(() => rmSync(certDir, { recursive: true, force: true }));
afterEach(cleanupProcesses);

/** A key and a bound simulator account over HTTPS. */
async function bind(url: string, mk: string): Promise<{ key: string; id: string }> {
  const k = await httpsJson(url, 'POST', '/v1/keys', { ca, headers: { authorization: `Bearer ${mk}` }, body: { label: 'tls' } });
  const c = await httpsJson(url, 'POST', '/ConnectEx', { ca, headers: { 'x-api-key': k.body.key }, body: { user: 'tls', password: 'pw', server: 'Sim-P5-Demo' } });
  expect(c.status, JSON.stringify(c.body)).toBe(200);
  return { key: k.body.key, id: c.body.id };
}

/** A /v1/stream socket over WSS subscribed to BTCUSD quotes; `frames` collects frame types. */
async function openStream(url: string, key: string, id: string, servername?: string) {
  const ws = new WebSocket(`${url.replace('https', 'wss')}/v1/stream?apiKey=${key}&id=${id}`, { ca, ...(servername ? { servername } : {}) });
  const frames: string[] = [];
  ws.on('message', (m) => frames.push((JSON.parse(String(m)) as { type: string }).type));
  await new Promise<void>((resolve, reject) => { ws.on('open', () => resolve()); ws.on('error', reject); });
  ws.send(JSON.stringify({ action: 'subscribe', symbol: 'BTCUSD' }));
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  const next = async (type: string, after = frames.length) => {
    while (!frames.slice(after).includes(type)) await new Promise((r) => setTimeout(r, 10));
  };
  return { ws, frames, closed, next };
}

describe('HTTPS and WSS', () => {
  let t: TestGateway;
  afterAll(() => t?.stop());

  it('serve on one port with the configured certificate; plain HTTP gets no answer there', async () => {
    t = await startTestGateway({ shards: 1, tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.key });
    expect(t.gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const url = t.gw.url;
    const health = await httpsJson(url, 'GET', '/healthz', { ca });
    expect(health).toEqual({ status: 200, body: { status: 'ok' }, fingerprint: fingerprintOf(readFileSync(certs.a.cert)) });
    const { key, id } = await bind(url, TEST_MANAGEMENT_KEY);
    const s = await openStream(url, key, id);
    await s.next('QUOTE');
    s.ws.close();
    const plain = await new Promise<string>((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port: t.gw.port, path: '/healthz' }, (res) => resolve(`answered ${res.statusCode}`));
      req.on('error', (e) => resolve(`refused: ${e.message}`));
      // uWS may also just wait for a TLS handshake that never comes: no answer either way.
      req.setTimeout(300, () => { req.destroy(); resolve('refused: no answer'); });
      req.end();
    });
    expect(plain).toMatch(/^refused/);
  });

  it('the pipelining port serves HTTPS and WSS with the same certificate: pipelined requests answered in order', async () => {
    const g = await startTestGateway({ shards: 1, tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.key, pipeliningPort: 0 });
    try {
      const { key, id } = await bind(g.gw.url, TEST_MANAGEMENT_KEY);
      const socket = tlsConnect({ host: '127.0.0.1', port: g.gw.pipeliningPort!, ca });
      await new Promise<void>((resolve, reject) => { socket.once('secureConnect', resolve); socket.once('error', reject); });
      expect(fingerprintOf(Buffer.from(socket.getPeerX509Certificate()!.toString()))).toBe(fingerprintOf(readFileSync(certs.a.cert)));
      const responses: RawResponse[] = [];
      let buf: Buffer = Buffer.alloc(0);
      socket.on('data', (d: Buffer) => (buf = parseResponses(Buffer.concat([buf, d]), responses)));
      const h = { 'x-api-key': key };
      socket.write(rawGet(`/AccountSummary?id=${id}`, h) + rawGet('/healthz') + rawGet(`/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=tls-pipe`, h));
      await until(() => responses.length === 3, 'three answers');
      expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(responses[0]!.json.balance).toBeGreaterThan(0);
      expect(responses[2]!.json.ticket).toBeGreaterThan(0);
      socket.end();
      const s = await openStream(`https://127.0.0.1:${g.gw.pipeliningPort}`, key, id);
      await s.next('QUOTE');
      s.ws.close();
    } finally {
      await g.stop();
    }
  });

  it('a key sealed with a passphrase loads with TLS_KEY_PASSPHRASE; a wrong or missing file is a ConfigError naming it', async () => {
    const g = await startTestGateway({ shards: 1, tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.encryptedKey, tlsKeyPassphrase: certs.passphrase });
    expect((await httpsJson(g.gw.url, 'GET', '/healthz', { ca })).status).toBe(200);
    await g.stop();
    const cases: Array<[Record<string, string>, RegExp]> = [
      // OpenSSL's own words alone ("bad decrypt", "key values mismatch", "ENOENT") left the operator
      // to guess which setting to change: each line now says it.
      [{ tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.encryptedKey, tlsKeyPassphrase: 'wrong' }, /TLS_KEY_FILE .*a-enc\.key: .*TLS_KEY_PASSPHRASE is not the key's passphrase/],
      [{ tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.encryptedKey }, /TLS_KEY_FILE .*a-enc\.key: .*the key is encrypted: set TLS_KEY_PASSPHRASE/],
      [{ tlsCertFile: certs.a.cert, tlsKeyFile: certs.b.key }, /TLS_CERT_FILE .*a\.crt \/ TLS_KEY_FILE .*b\.key: .*key values mismatch.*the key is not the certificate's/],
      [{ tlsCertFile: join(certDir, 'missing.crt'), tlsKeyFile: certs.a.key }, /TLS_CERT_FILE .*missing\.crt: ENOENT \(no such file\)/],
    ];
    for (const [tls, message] of cases) {
      const dataDir = tempDir();
      const err = await startGateway(parseConfig({ port: 0, dataDir, logLevel: 'silent', ...tls }), { log: createLogger('silent') }).then(
        async (gw) => { await gw.close(); return undefined; }, (e: unknown) => e as Error);
      expect(err, JSON.stringify(tls)).toBeInstanceOf(ConfigError);
      expect(err!.message).toMatch(message);
    }
    expect(() => parseConfig({ tlsCertFile: certs.a.cert })).toThrow(/tlsKeyFile: TLS_CERT_FILE and TLS_KEY_FILE go together/);
  });

  it('a private key (or certificate) given in place of its path is refused naming the setting, never shown', () => {
    // The usual slip with a secrets store: TLS_KEY_FILE="$(cat key.pem)". The start's one line went to
    // the log with the whole key in it (ENOENT naming the "path").
    const pem = readFileSync(certs.a.key, 'utf8');
    const body = pem.split('\n')[1]!;
    for (const [input, name] of [
      [{ tlsCertFile: certs.a.cert, tlsKeyFile: pem }, /tlsKeyFile: .*PEM.*not a path/],
      [{ tlsCertFile: readFileSync(certs.a.cert, 'utf8'), tlsKeyFile: certs.a.key }, /tlsCertFile: .*PEM.*not a path/],
      [{ tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.key, tlsCaFile: pem }, /tlsCaFile: .*PEM.*not a path/],
      [{ brokerMode: 'bridge', bridgeUrl: 'tls://127.0.0.1:4510', bridgeCaFile: pem }, /bridgeCaFile: .*PEM.*not a path/],
    ] as Array<[Record<string, string>, RegExp]>) {
      let err: Error | undefined;
      try {
        parseConfig(input);
      } catch (e) {
        err = e as Error;
      }
      expect(err, JSON.stringify(Object.keys(input))).toBeInstanceOf(ConfigError);
      expect(err!.message).toMatch(name);
      expect(err!.message).not.toContain(body.slice(0, 20));
    }
  });
});

describe('plain HTTP', () => {
  it('on an address other machines reach (HOST=0.0.0.0) is a warning: keys would cross the network in clear; on loopback an info line', async () => {
    const lines: Array<{ level: string; msg: string; host?: string }> = [];
    const log = createLogger('info', {}, (line) => lines.push(JSON.parse(line)));
    const open = await startTestGateway({ shards: 1, host: '0.0.0.0' }, { log });
    await open.stop();
    const local = await startTestGateway({ shards: 1 }, { log });
    await local.stop();
    const plain = lines.filter((l) => l.msg.startsWith('plain HTTP and WS'));
    expect(plain).toEqual([
      expect.objectContaining({ level: 'warn', host: '0.0.0.0', msg: expect.stringContaining('keys cross the network in clear') }),
      expect.objectContaining({ level: 'info', msg: expect.stringContaining('no TLS_CERT_FILE / TLS_KEY_FILE configured') }),
    ]);
  });
});

describe('certificate expiry', () => {
  it('the start and each reload log when the certificate expires (a warning within 14 days); /metrics has it for alerts', async () => {
    // The test certificates are valid for 2 days: "expires soon".
    const lines: Array<{ level: string; msg: string; notAfter?: string; daysLeft?: number }> = [];
    const log = createLogger('info', {}, (line) => lines.push(JSON.parse(line)));
    const dir = tempDir();
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    copyFileSync(certs.a.cert, cert);
    copyFileSync(certs.a.key, key);
    const t = await startTestGateway({ shards: 1, tlsCertFile: cert, tlsKeyFile: key }, { log });
    try {
      const notAfter = (pem: string) => new Date(new X509Certificate(readFileSync(pem)).validTo).toISOString();
      const expiry = async () => {
        const text = (await httpsJson(t.gw.url, 'GET', '/metrics', { ca })).body as string;
        return /^tagw_tls_certificate_expiry_timestamp_seconds (\S+)$/m.exec(text)?.[1];
      };
      expect(lines.filter((l) => l.msg === 'TLS certificate expires soon')).toEqual([
        expect.objectContaining({ level: 'warn', notAfter: notAfter(certs.a.cert), daysLeft: expect.any(Number) }),
      ]);
      expect(Number(await expiry()) * 1000).toBe(Date.parse(notAfter(certs.a.cert)));
      // A renewal (b is signed a moment later): the reload logs it and the metric follows.
      copyFileSync(certs.b.cert, cert);
      copyFileSync(certs.b.key, key);
      await t.gw.reloadTls();
      expect(lines.filter((l) => l.msg === 'TLS certificate expires soon').at(-1)).toMatchObject({ notAfter: notAfter(certs.b.cert) });
      expect(Number(await expiry()) * 1000).toBe(Date.parse(notAfter(certs.b.cert)));
    } finally {
      await t.stop();
    }
  });
});

describe('SIGHUP reloads the certificate', () => {
  it('new connections naming the host get the new certificate; an open WSS socket keeps streaming; bad files keep the old one', async () => {
    const dir = tempDir();
    const cert = join(dir, 'server.crt');
    const key = join(dir, 'server.key');
    copyFileSync(certs.a.cert, cert);
    copyFileSync(certs.a.key, key);
    const mk = 'tls-reload-management-key-0123456789';
    const p = startProcess({ GATEWAY_MANAGEMENT_KEY: mk, TLS_CERT_FILE: cert, TLS_KEY_FILE: key, HTTP_PIPELINING_PORT: '0' });
    const url = await p.listening;
    await until(() => p.output().includes('"msg":"pipelining listener"'), 'the pipelining listener');
    const pipeUrl = /"msg":"pipelining listener","url":"([^"]+)"/.exec(p.output())![1]!;
    expect(url).toMatch(/^https:/);
    expect(p.output()).toContain('"tls":true');
    expect(p.output()).not.toContain('plain HTTP');
    const fpA = fingerprintOf(readFileSync(certs.a.cert));
    const fpB = fingerprintOf(readFileSync(certs.b.cert));
    expect((await httpsJson(url, 'GET', '/healthz', { ca })).fingerprint).toBe(fpA);
    const account = await bind(url, mk);
    const s = await openStream(url, account.key, account.id);
    await s.next('QUOTE');

    // The renewal: new files in place, then SIGHUP.
    copyFileSync(certs.b.cert, cert);
    copyFileSync(certs.b.key, key);
    p.child.kill('SIGHUP');
    while (!p.output().includes('TLS certificate reloaded')) await new Promise((r) => setTimeout(r, 20));
    const sni = { ca, servername: 'localhost' };
    expect(await httpsJson(url, 'GET', '/healthz', sni)).toEqual({ status: 200, body: { status: 'ok' }, fingerprint: fpB });
    // Every route is there under the new certificate, authenticated ones too.
    expect((await httpsJson(url, 'GET', `/AccountSummary?id=${account.id}`, { ...sni, headers: { 'x-api-key': account.key } })).status).toBe(200);
    // No SNI (a client connecting by bare IP address): the certificate of the start, until a restart.
    expect((await httpsJson(url, 'GET', '/healthz', { ca })).fingerprint).toBe(fpA);
    // The pipelining port (Node's TLS) takes the new certificate for every new connection, SNI or not.
    expect((await httpsJson(pipeUrl, 'GET', '/healthz', { ca })).fingerprint).toBe(fpB);
    // The socket opened before the reload is still open and still gets quotes.
    await s.next('QUOTE');
    expect(s.ws.readyState).toBe(WebSocket.OPEN);
    // And a new WSS socket on the new certificate streams too.
    const s2 = await openStream(url, account.key, account.id, 'localhost');
    await s2.next('QUOTE');

    // A broken file: logged, the certificate in use stays.
    writeFileSync(cert, 'not a certificate');
    p.child.kill('SIGHUP');
    while (!p.output().includes('TLS certificate not reloaded')) await new Promise((r) => setTimeout(r, 20));
    expect((await httpsJson(url, 'GET', '/healthz', sni)).fingerprint).toBe(fpB);
    expect((await httpsJson(pipeUrl, 'GET', '/healthz', { ca })).fingerprint).toBe(fpB);
    await s.next('QUOTE');

    // The next renewal works the same (the server name registered again, its routes with it).
    copyFileSync(certs.a.cert, cert);
    copyFileSync(certs.a.key, key);
    p.child.kill('SIGHUP');
    while (p.output().split('TLS certificate reloaded').length < 3) await new Promise((r) => setTimeout(r, 20));
    expect(await httpsJson(url, 'GET', '/healthz', sni)).toEqual({ status: 200, body: { status: 'ok' }, fingerprint: fpA });
    expect((await httpsJson(url, 'GET', `/AccountSummary?id=${account.id}`, { ...sni, headers: { 'x-api-key': account.key } })).status).toBe(200);
    await s2.next('QUOTE');

    p.child.kill('SIGTERM');
    expect(await s.closed).toBe(1001);
    expect(await s2.closed).toBe(1001);
    expect(await p.exited).toBe(0);
  }, 30_000);
});

describe('bridge over TLS', () => {
  let bs: BridgeSim;
  beforeAll(async () => {
    bs = await startBridgeSim({ start: false, tls: { cert: readFileSync(certs.a.cert), key: readFileSync(certs.a.key) } });
  });
  afterAll(async () => {
    await bs?.close();
  });

  const connectEx = (t: TestGateway, user: string) => t.req('POST', '/v1/keys', { headers: { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` }, body: { label: 'b' } })
    .then((k) => t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k.body.key }, body: { user, password: 'bridge-secret', server: 'Sim-P5-Demo' } }).then((r) => ({ r, key: k.body.key as string })));

  it('tls://host:port with the pinned CA: accounts bind and quote', async () => {
    const t = await startTestGateway({ shards: 1, brokerMode: 'bridge', bridgeUrl: bs.url, bridgeCaFile: certs.ca });
    try {
      const { r, key } = await connectEx(t, 'over-tls');
      expect(r.status, r.text).toBe(200);
      const q = await t.req('GET', `/GetQuote?id=${r.body.id}&symbol=BTCUSD`, { headers: { 'x-api-key': key } });
      expect(q.status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  /** A TLS server that records the connections it gets and every byte it receives. */
  async function recordingBridge(cert: string, key: string) {
    const seen = { connections: 0, bytes: 0 };
    const server = createTlsServer({ cert: readFileSync(cert), key: readFileSync(key) }, (s) => {
      s.on('data', (d: Buffer) => (seen.bytes += d.length));
      s.on('error', () => {});
    });
    server.on('connection', () => seen.connections++);
    server.on('tlsClientError', () => {});
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    return { seen, port: (server.address() as { port: number }).port, close: () => server.close() };
  }

  it.each([
    ['does not chain to the pinned CA', () => certs.rogue, () => ({ bridgeCaFile: certs.ca })],
    ['is from a private CA and none is pinned (system roots)', () => certs.a, () => ({})],
  ])('a bridge whose certificate %s is refused before a byte of the login is sent', async (_name, server, pin) => {
    const rogue = await recordingBridge(server().cert, server().key);
    // ConnectEx answers once the binding settles or bindWaitMs passes, GetQuote NOT_CONNECTED once
    // brokerWaitMs passes; a refused connection never settles, so short waits (the defaults are 3 s
    // and 2 s) keep the same answers without idling.
    const t = await startTestGateway({ shards: 1, brokerMode: 'bridge', bridgeUrl: `tls://127.0.0.1:${rogue.port}`, bindWaitMs: 200, brokerWaitMs: 200, ...pin() });
    try {
      const { r, key } = await connectEx(t, 'refused');
      // The binding is kept; its connection is attempted in the background and refused.
      expect(r.status).toBe(200);
      while (rogue.seen.connections === 0) await new Promise((res) => setTimeout(res, 10));
      const q = await t.req('GET', `/GetQuote?id=${r.body.id}&symbol=BTCUSD`, { headers: { 'x-api-key': key } });
      expect(q.body).toMatchObject({ error: 'NOT_CONNECTED' });
      expect(rogue.seen.bytes).toBe(0);
    } finally {
      await t.stop();
      rogue.close();
    }
  });

  /** A key, then a login bound through /ConnectEx of a gateway process: the bind's status. */
  const bindOver = async (url: string, user: string, password: string): Promise<number> => {
    const key = await fetch(`${url}/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` }, body: JSON.stringify({ label: 'b' }) }).then((r) => r.json() as Promise<{ key: string }>);
    return (await fetch(`${url}/ConnectEx`, { method: 'POST', headers: { 'x-api-key': key.key }, body: JSON.stringify({ user, password, server: 'Sim-P5-Demo' }) })).status;
  };

  it('the log says why a bridge is not reached (its certificate), once however often its accounts retry, never the password', async () => {
    // docs/operations.md#tls: "its accounts stay NOT_CONNECTED and the log says why". Nothing said
    // it: the account stayed `connecting` with no last error, and no line named the certificate.
    const rogue = await recordingBridge(certs.a.cert, certs.a.key);
    const p = startProcess({ BROKER_MODE: 'bridge', BRIDGE_URL: `tls://127.0.0.1:${rogue.port}`, BIND_WAIT_MS: '200', BROKER_WAIT_MS: '200', SHARDS: '1', GATEWAY_MANAGEMENT_KEY: TEST_MANAGEMENT_KEY });
    try {
      const url = await p.listening;
      expect(await bindOver(url, 'refused', 'bridge-secret-pw')).toBe(200);
      const said = () => p.output().split('\n').filter((l) => l.includes('"msg":"cannot connect to the bridge'));
      await until(() => said().length > 0, 'a line saying why');
      await until(() => rogue.seen.connections >= 3, 'two more attempts of the backoff');
      expect(said().length, p.output()).toBe(1);
      expect((JSON.parse(said()[0]!) as { error: string }).error).toMatch(/over TLS \(.*(certificate|issuer)/i);
      expect(p.output()).not.toContain('bridge-secret-pw');
      expect(rogue.seen.bytes).toBe(0);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
      rogue.close();
    }
    // A tcp:// bridge whose port refuses: the line names the socket's error too.
    const closed = createTlsServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', () => r()));
    const port = (closed.address() as { port: number }).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const q = startProcess({ BROKER_MODE: 'bridge', BRIDGE_URL: `tcp://127.0.0.1:${port}`, BIND_WAIT_MS: '200', SHARDS: '1', GATEWAY_MANAGEMENT_KEY: TEST_MANAGEMENT_KEY });
    try {
      const url = await q.listening;
      await bindOver(url, 'nobody-home', 'pw-of-nobody');
      await until(() => q.output().includes('"msg":"cannot connect to the bridge'), 'a line saying why');
      expect(q.output()).toMatch(new RegExp(`"error":"cannot reach bridge 127\\.0\\.0\\.1:${port}: connect ECONNREFUSED`));
    } finally {
      q.child.kill('SIGTERM');
      await q.exited;
    }
    // One that takes the connection and closes it without a word (another service on the port):
    // the login never completes, and the line says so.
    const mute = createNetServer((sock) => sock.once('data', () => sock.destroy()));
    await new Promise<void>((r) => mute.listen(0, '127.0.0.1', () => r()));
    const mutePort = (mute.address() as { port: number }).port;
    const m = startProcess({ BROKER_MODE: 'bridge', BRIDGE_URL: `tcp://127.0.0.1:${mutePort}`, BIND_WAIT_MS: '200', SHARDS: '1', GATEWAY_MANAGEMENT_KEY: TEST_MANAGEMENT_KEY });
    try {
      const url = await m.listening;
      await bindOver(url, 'mute', 'pw-of-mute');
      await until(() => m.output().includes('"msg":"cannot connect to the bridge'), 'a line saying why');
      expect(m.output()).toMatch(new RegExp(`"error":"bridge 127\\.0\\.0\\.1:${mutePort} took the connection but the login did not complete \\(connection lost during hello\\)`));
      expect(m.output()).not.toContain('pw-of-mute');
    } finally {
      m.child.kill('SIGTERM');
      await m.exited;
      mute.close();
    }
  });

  it('bridge mode over plain tcp:// starts with a warning; BRIDGE_CA_FILE with tcp:// is a mistake', async () => {
    const lines: string[] = [];
    const gw = await startGateway(parseConfig({ port: 0, dataDir: tempDir(), brokerMode: 'bridge', bridgeUrl: `tcp://127.0.0.1:${bs.port}`, shards: 1 }), { log: createLogger('warn', {}, (l) => lines.push(l)), shardWorkerFile: SHARD_WORKER, checkpointWorkerFile: CHECKPOINT_WORKER });
    await gw.close();
    expect(lines.some((l) => l.includes('bridge without TLS'))).toBe(true);
    await expect(startGateway(parseConfig({ port: 0, dataDir: tempDir(), brokerMode: 'bridge', bridgeUrl: 'tcp://127.0.0.1:1', bridgeCaFile: certs.ca }), { log: createLogger('silent') }))
      .rejects.toThrow(/BRIDGE_CA_FILE needs BRIDGE_URL=tls:\/\//);
  });
});
