// The key that seals broker passwords at rest: a changed key is caught at start, and after an
// explicit reset the accounts can be bound again (and their session handles renewed).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const dirs: string[] = [];
const running: TestGateway[] = [];
afterEach(async () => {
  for (const g of running.splice(0)) await g.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'tagw-key-'));
  dirs.push(d);
  return d;
};
const start = async (dataDir: string, overrides: Record<string, unknown>) => {
  const g = await startTestGateway({ shards: 1, ...overrides }, { dataDir });
  running.push(g);
  return g;
};
const stop = async (g: TestGateway) => {
  running.splice(running.indexOf(g), 1);
  await g.stop();
};

describe('secret key', () => {
  it('a key that opens none of the stored passwords is refused at start; with SECRET_KEY_RESET the accounts bind again', async () => {
    const dataDir = tempDir();
    const k1 = randomBytes(32).toString('hex');
    const k2 = randomBytes(32).toString('hex');
    const a = await start(dataDir, { secretKey: k1 });
    const key = (await a.req('POST', '/v1/keys', { headers: mgmt(a.managementKey), body: { label: 'k' } })).body.key as string;
    const h = { 'x-api-key': key };
    const login = { user: 'keyed', password: 'pw-1', server: 'Sim-P5-Demo' };
    const id = (await a.req('POST', '/ConnectEx', { headers: h, body: login })).body.id as string;
    const oldHandle = (await a.req('POST', '/v1/connect', { headers: h, body: { brokerAccountId: id } })).body.handle as string;
    expect(oldHandle).toBeTruthy();
    await stop(a);

    await expect(start(dataDir, { secretKey: k2 })).rejects.toThrow(ConfigError);
    await expect(start(dataDir, { secretKey: k2 })).rejects.toThrow(/opens none of the 1 broker passwords.*SECRET_KEY_RESET=1/);

    const b = await start(dataDir, { secretKey: k2, secretKeyReset: true });
    expect((await b.req('GET', `/AccountSummary?id=${id}`, { headers: h })).body.error).toBe('TERMINAL_ERROR');
    // Bound again: the broker checks the password, which is sealed with the new key.
    expect((await b.req('POST', '/ConnectEx', { headers: h, body: { ...login, password: 'wrong' } })).body.error).toBe('BROKER_AUTH_FAILED');
    expect(await b.req('POST', '/ConnectEx', { headers: h, body: login })).toMatchObject({ status: 200, body: { id } });
    expect((await b.req('GET', `/AccountSummary?id=${id}`, { headers: h })).status).toBe(200);
    expect((await b.req('POST', '/ConnectEx', { headers: h, body: { ...login, password: 'wrong' } })).body.error).toBe('BROKER_AUTH_FAILED');
    // The session handle sealed with the old key cannot be given out again: only a key that may end
    // the session (it is shared: a read-only key may not Disconnect it either) starts a new one.
    const ro = (await b.req('POST', `/v1/seats/${id}/keys`, { headers: mgmt(b.managementKey), body: { label: 'ro', readOnly: true } })).body.key as string;
    const refused = await b.req('POST', '/v1/connect', { headers: { 'x-api-key': ro }, body: { brokerAccountId: id } });
    expect([refused.status, refused.body.error], refused.text).toEqual([403, 'READ_ONLY_KEY']);
    expect((await b.req('GET', `/v1/proxy/AccountSummary?handle=${oldHandle}`, { headers: h })).status).toBe(200);
    const renewed = await b.req('POST', '/v1/connect', { headers: h, body: { brokerAccountId: id } });
    expect(renewed.status).toBe(200);
    expect(renewed.body.handle).not.toBe(oldHandle);
    expect((await b.req('GET', `/v1/proxy/AccountSummary?handle=${renewed.body.handle}`, { headers: h })).status).toBe(200);
    expect((await b.req('GET', `/v1/proxy/AccountSummary?handle=${oldHandle}`, { headers: h })).status).toBe(404);
    await stop(b);
    // Everything opens with the new key now: no reset needed.
    await start(dataDir, { secretKey: k2 });
  }, 60_000);

  it('a refused start leaves DATA_DIR as it was: no key file is generated, so the right key still starts', async () => {
    const dataDir = tempDir();
    const k1 = randomBytes(32).toString('hex');
    const a = await start(dataDir, { secretKey: k1 });
    const key = (await a.req('POST', '/v1/keys', { headers: mgmt(a.managementKey), body: { label: 'k' } })).body.key as string;
    expect((await a.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'k2', password: 'pw', server: 'Sim-P5-Demo' } })).status).toBe(200);
    await stop(a);
    // Started without the key: refused (a fresh key would open nothing), and no secret.key is written.
    await expect(start(dataDir, {})).rejects.toThrow(/opens none of the 1 broker passwords/);
    expect(existsSync(join(dataDir, 'secret.key'))).toBe(false);
    await start(dataDir, { secretKey: k1 });
  }, 60_000);

  it('a configured key that differs from DATA_DIR/secret.key is refused at start', async () => {
    const dataDir = tempDir();
    await stop(await start(dataDir, {})); // generates DATA_DIR/secret.key
    await expect(start(dataDir, { secretKey: randomBytes(32).toString('hex') })).rejects.toThrow(/is not the key in .*secret\.key/);
  });
});
