import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { generateKey } from '../../src/auth/keys.js';
import { ManualClock, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

let t: TestGateway;
const clock = new ManualClock();
beforeAll(async () => {
  t = await startTestGateway({ trustProxy: true }, { clock });
});
afterAll(async () => {
  await t.stop();
});

// Each test uses its own client address (trusted x-forwarded-for) so throttle state does not leak between tests.
let ipSeq = 1;
const nextIp = () => `198.51.100.${ipSeq++}`;

async function apiKey(opts: { readOnly?: boolean; accountScoped?: boolean } = {}) {
  const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
  const k = await t.req('POST', `/v1/seats/${seat.body.id}/keys`, { headers: mgmt(t.managementKey), body: { label: 'k', ...opts } });
  return { seatId: seat.body.id as string, key: k.body.key as string, id: k.body.id as string };
}

describe('where each key kind is accepted (SPEC §5)', () => {
  it('provisioning: missing key 401, API key 401, management key via Bearer or x-management-key ok', async () => {
    const ip = nextIp();
    const none = await t.req('GET', '/v1/seats', { headers: { 'x-forwarded-for': ip } });
    expect(none.status).toBe(401);
    expect(none.body.error).toBe('MANAGEMENT_KEY_REQUIRED');
    const { key } = await apiKey();
    expect((await t.req('GET', '/v1/seats', { headers: { ...mgmt(key), 'x-forwarded-for': ip } })).status).toBe(401);
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) })).status).toBe(200);
    expect((await t.req('GET', '/v1/seats', { headers: { 'x-management-key': t.managementKey } })).status).toBe(200);
  });

  it('a generated management key works like the configured one', async () => {
    const c = createCustomer(t.gw.services.tenancy, 'gen');
    expect(c.managementKey).toMatch(/^tagw_m_/);
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(c.managementKey) })).status).toBe(200);
  });

  it('x-api-key routes: missing 401, invalid 401, management key 401, Bearer not accepted', async () => {
    const ip = nextIp();
    const h = (extra: Record<string, string>) => ({ headers: { 'x-forwarded-for': ip, ...extra } });
    const missing = await t.req('GET', '/v1/whoami', h({}));
    expect(missing.status).toBe(401);
    expect(missing.body.error).toBe('API_KEY_REQUIRED');
    expect((await t.req('GET', '/v1/whoami', h({ 'x-api-key': 'tagw_k_0000000000000000_' + 'A'.repeat(43) }))).status).toBe(401);
    expect((await t.req('GET', '/v1/whoami', h({ 'x-api-key': 'garbage' }))).status).toBe(401);
    expect((await t.req('GET', '/v1/whoami', h({ 'x-api-key': t.managementKey }))).status).toBe(401);
    const { key } = await apiKey();
    const bearer = await t.req('GET', '/v1/whoami', h({ authorization: `Bearer ${key}` }));
    expect(bearer.status).toBe(401);
    // It said "API key required" to a client that had sent its API key (as Bearer): now where it goes.
    expect(bearer.body).toMatchObject({ error: 'API_KEY_REQUIRED', message: expect.stringContaining('x-api-key only, not in Authorization') });
    expect((await t.req('GET', '/v1/whoami', h({ 'x-management-key': t.managementKey }))).body.message).toContain('not in x-management-key');
    const ok = await t.req('GET', '/v1/whoami', h({ 'x-api-key': key }));
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ readOnly: false, accountScoped: false });
  });

  it('a key with a valid id but the wrong secret is 401', async () => {
    const { key } = await apiKey();
    const forged = key.slice(0, -4) + (key.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expect((await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': forged, 'x-forwarded-for': nextIp() } })).status).toBe(401);
  });

  it('a revoked key is 401', async () => {
    const { key, id } = await apiKey();
    expect((await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(200);
    await t.req('DELETE', `/v1/keys/${id}`, { headers: mgmt(t.managementKey) });
    const r = await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key, 'x-forwarded-for': nextIp() } });
    expect(r.status).toBe(401);
    expect(r.body.error).toBe('INVALID_API_KEY');
  });

  it('scoped and read-only flags are reported for the key', async () => {
    const { key, seatId } = await apiKey({ readOnly: true, accountScoped: true });
    const r = await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } });
    expect(r.body).toMatchObject({ readOnly: true, accountScoped: true, seatId });
  });

  it('error messages never echo the key', async () => {
    const bogus = generateKey('api').value;
    const r = await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': bogus, 'x-forwarded-for': nextIp() } });
    expect(r.text).not.toContain(bogus);
    // The secret is everything after the id: base64url, so it may itself contain '_'.
    const secret = bogus.split('_').slice(3).join('_');
    expect(secret.length).toBeGreaterThanOrEqual(40);
    expect(r.text).not.toContain(secret);
  });
});

describe('GATEWAY_MANAGEMENT_KEY', () => {
  it('a configured key in the generated format (tagw_m_...) that this data dir never stored is the management key', async () => {
    // E.g. the key of another gateway's bootstrap.json, reused so that scripts keep one key.
    const configured = generateKey('management').value;
    const g = await startTestGateway({ managementKey: configured });
    try {
      const r = await g.req('GET', '/v1/seats', { headers: mgmt(configured) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect((await g.req('POST', '/v1/seats', { headers: { 'x-management-key': configured }, body: {} })).status).toBe(201);
      // Still a management key only: not an API key on x-api-key routes.
      expect((await g.req('GET', '/v1/whoami', { headers: { 'x-api-key': configured } })).status).toBe(401);
      // Another value of the same format is not it.
      expect((await g.req('GET', '/v1/seats', { headers: mgmt(generateKey('management').value) })).status).toBe(401);
    } finally {
      await g.stop();
    }
  });
});

describe('failed-auth throttle (SPEC §8)', () => {
  it('the 41st failure from an IP within 5 minutes is 429 with retry-after 600; the block lifts after 10 minutes', async () => {
    const ip = nextIp();
    const bad = { headers: { 'x-api-key': 'nope', 'x-forwarded-for': ip } };
    for (let i = 0; i < 40; i++) {
      if (i > 0) clock.advance(1_000);
      const r = await t.req('GET', '/v1/whoami', bad);
      expect(r.status).toBe(401);
    }
    const blocked = await t.req('GET', '/v1/whoami', bad);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBe('600');
    expect(blocked.body.message).toBe('too many failed auth attempts, slow down');
    // Even a valid key is refused while the IP is blocked.
    const { key } = await apiKey();
    expect((await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key, 'x-forwarded-for': ip } })).status).toBe(429);
    // Other IPs are unaffected.
    expect((await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key, 'x-forwarded-for': nextIp() } })).status).toBe(200);
    clock.advance(5 * 60_000);
    const later = await t.req('GET', '/v1/whoami', bad);
    expect(later.status).toBe(429);
    expect(Number(later.headers.get('retry-after'))).toBe(300);
    clock.advance(5 * 60_000);
    expect((await t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key, 'x-forwarded-for': ip } })).status).toBe(200);
  });

  it('failures spread wider than the 5-minute window never block', async () => {
    const ip = nextIp();
    const bad = { headers: { 'x-api-key': 'nope', 'x-forwarded-for': ip } };
    for (let i = 0; i < 60; i++) {
      expect((await t.req('GET', '/v1/whoami', bad)).status).toBe(401);
      clock.advance(10_000); // 30 failures per 5 minutes
    }
  });

  it('behind a trusted proxy the client is the right-most x-forwarded-for entry (what the proxy appended)', async () => {
    const proxied = await startTestGateway({ authFailLimit: 3, trustProxy: true });
    try {
      // A client varying what it puts left of the proxy's entry is still one client.
      for (let i = 0; i < 3; i++) {
        await proxied.req('GET', '/v1/whoami', { headers: { 'x-api-key': 'nope', 'x-forwarded-for': `203.0.113.${i}, 198.51.100.7` } });
      }
      const blocked = await proxied.req('GET', '/v1/whoami', { headers: { 'x-api-key': 'nope', 'x-forwarded-for': '203.0.113.50, 198.51.100.7' } });
      expect(blocked.status).toBe(429);
      // Another client (another right-most address) is not blocked.
      const other = await proxied.req('GET', '/v1/whoami', { headers: { 'x-api-key': 'nope', 'x-forwarded-for': '198.51.100.7, 198.51.100.8' } });
      expect(other.status).toBe(401);
    } finally {
      await proxied.stop();
    }
  });

  it('IPv6 clients are counted by their /64 (rotating addresses within it does not dodge the block); IPv4 by address', async () => {
    const proxied = await startTestGateway({ authFailLimit: 3, trustProxy: true });
    try {
      const fail = (ip: string) => proxied.req('GET', '/v1/whoami', { headers: { 'x-api-key': 'nope', 'x-forwarded-for': ip } });
      for (const ip of ['2001:db8:7:1::1', '2001:db8:7:1:aaaa::2', '2001:db8:7:1:ffff:ffff:ffff:ffff']) expect((await fail(ip)).status).toBe(401);
      const blocked = await fail('2001:db8:7:1::4');
      expect([blocked.status, blocked.headers.get('retry-after')]).toEqual([429, '600']);
      // Another /64, and IPv4 neighbours, are other clients.
      expect((await fail('2001:db8:7:2::1')).status).toBe(401);
      for (const ip of ['198.51.100.21', '198.51.100.22', '198.51.100.23']) expect((await fail(ip)).status).toBe(401);
      expect((await fail('::ffff:198.51.100.24')).status).toBe(401);
    } finally {
      await proxied.stop();
    }
  });

  it('x-forwarded-for is ignored unless TRUST_PROXY is set', async () => {
    const plain = await startTestGateway({ authFailLimit: 3 });
    try {
      for (let i = 0; i < 3; i++) {
        await plain.req('GET', '/v1/whoami', { headers: { 'x-api-key': 'nope', 'x-forwarded-for': `203.0.113.${i}` } });
      }
      // All three failures counted against the socket address (127.0.0.1), whatever the header said.
      const r = await plain.req('GET', '/v1/whoami', { headers: { 'x-api-key': 'nope', 'x-forwarded-for': '203.0.113.99' } });
      expect(r.status).toBe(429);
    } finally {
      await plain.stop();
    }
  });
});
