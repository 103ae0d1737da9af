// GET /v1/status and GET /v1/accounts/connections (the console's Overview and Seats data), and the
// connection log behind them.
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../helpers/until.js';
import { configSchema, parseConfig } from '../../src/config.js';
import { unsetMeanings } from '../../src/configUnset.js';
import { ConnectionLog, HISTORY_LENGTH } from '../../src/runtime/connectionLog.js';
import { redactedConfig } from '../../src/http/routes/status.js';
import { OPERATOR_PHASES, type OperatorPhase } from '../../src/runtime/hosts/accountCommands.js';
import { createCustomer } from '../../src/auth/bootstrap.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('ConnectionLog', () => {
  it('keeps the latest phase, changes only, at most HISTORY_LENGTH per account, and counts by phase (forgotten accounts not counted)', () => {
    const phase = fc.constantFrom(...OPERATOR_PHASES);
    // A report, or (null) the account forgotten (its seat deleted).
    fc.assert(fc.property(fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c'), fc.option(phase, { freq: 6 })), { maxLength: 200 }), (reports) => {
      let now = 0;
      const log = new ConnectionLog(() => ++now);
      const model = new Map<string, OperatorPhase[]>();
      for (const [id, p] of reports) {
        if (p === null) {
          log.forget(id);
          model.delete(id);
          expect(log.history(id)).toEqual([]);
          continue;
        }
        log.note(id, p);
        const h = model.get(id) ?? [];
        if (h[h.length - 1] !== p) h.push(p);
        model.set(id, h);
      }
      for (const [id, h] of model) {
        const got = log.history(id);
        expect(got.map((x) => x.phase)).toEqual(h.slice(-HISTORY_LENGTH));
        expect(log.phase(id)).toBe(h[h.length - 1]);
        for (let i = 1; i < got.length; i++) expect(got[i]!.at).toBeGreaterThan(got[i - 1]!.at);
        const drop = [...h].reverse().find((p) => p === 'reconnecting' || p === 'refused');
        if (drop && got.some((x) => x.phase === drop)) expect(log.lastError(id)?.phase).toBe(drop);
      }
      const counts = log.counts(OPERATOR_PHASES);
      expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(model.size);
      for (const p of OPERATOR_PHASES) expect(counts[p]).toBe([...model.values()].filter((h) => h[h.length - 1] === p).length);
    }));
  });
});

describe('unsetMeanings', () => {
  it('says what applies for every optional setting left unset, and nothing for one that is set', () => {
    const optional = Object.entries(configSchema.shape).filter(([, v]) => v.safeParse(undefined).success && v.parse(undefined) === undefined).map(([k]) => k);
    const words = unsetMeanings(parseConfig({}));
    expect(Object.keys(words).sort()).toEqual(optional.sort());
    for (const w of Object.values(words)) expect(w).not.toBe('');
    const set = unsetMeanings(parseConfig({ simMarketHours: 'always', clusterLeaseMs: 3000 }));
    expect(set).not.toHaveProperty('simMarketHours');
    expect(set.clusterStepDownMs).toBe('the lease: 3000');
    expect(set.clusterSettleMs).toBe('a third of the lease: 1000');
    expect(unsetMeanings(parseConfig({ brokerMode: 'bridge', bridgeUrl: 'tcp://127.0.0.1:4510' })).simMarketHours).toMatch(/^not used \(bridge mode/);
  });
});

describe('redactedConfig', () => {
  it('hides every secret setting, lists unset ones as null, and keeps paths and flags', () => {
    const config = { ...parseConfig({ managementKey: 'm'.repeat(20), secretKey: 'ab'.repeat(32) }), tlsKeyPassphrase: 'hunter2', tlsKeyFile: '/etc/tagw/key.pem' };
    const out = redactedConfig(config);
    expect(out).toMatchObject({ managementKey: '[redacted]', secretKey: '[redacted]', tlsKeyPassphrase: '[redacted]', tlsKeyFile: '/etc/tagw/key.pem', secretKeyReset: false, bridgeUrl: null });
    expect(JSON.stringify(out)).not.toMatch(/hunter2|mmmmmmmm|abababab/);
  });
  it("shows cluster engines' addresses without their credentials", () => {
    const config = parseConfig({
      natsUrl: 'nats://tok3n@10.0.0.1:4222,nats://u:pw1@10.0.0.2:4222', databaseUrl: 'postgres://tagw:s3cret@db:5432/tagw',
      brokerMode: 'bridge', bridgeUrl: 'tcp://127.0.0.1:4510',
    });
    const out = redactedConfig(config);
    expect(out).toMatchObject({
      natsUrl: 'nats://[redacted]@10.0.0.1:4222,nats://[redacted]@10.0.0.2:4222', databaseUrl: 'postgres://[redacted]@db:5432/tagw',
      bridgeUrl: 'tcp://127.0.0.1:4510',
    });
    expect(JSON.stringify(out)).not.toMatch(/tok3n|pw1|s3cret/);
  });
});

describe('status routes', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ secretKey: 'ab'.repeat(32), shards: 1 });
  });
  afterAll(() => t.stop());

  it("answers the operator's management key with version, uptime, shards, phases and the configuration with secrets redacted", async () => {
    const r = await t.req('GET', '/v1/status', { headers: mgmt(t.managementKey) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ version: '0.1.0', apiVersion: '1.0.0', seats: 0, shards: [{ index: 0, ready: true, restarts: 0, accounts: 0 }] });
    expect(r.body.uptimeSec).toBeGreaterThanOrEqual(0);
    expect(r.body.config.managementKey).toBe('[redacted]');
    expect(r.body.config.secretKey).toBe('[redacted]');
    expect(r.body.config.secretKeyReset).toBe(false);
    expect(r.body.config.bridgeUrl).toBeNull();
    // Unset settings whose default is decided where they are used say what applies instead.
    expect(r.body.config.clusterStepDownMs).toBeNull();
    expect(r.body.configUnset).toMatchObject({ simMarketHours: expect.stringMatching(/^sessions/), clusterStepDownMs: 'the lease: 10000', bridgeUrl: 'not used (embedded simulator)' });
    expect(r.body.configUnset).not.toHaveProperty('managementKey');
    expect(r.body.simClock).toBeNull(); // no SIM_START: the simulator runs on the wall clock
    expect(r.text).not.toContain(t.managementKey);
    expect(r.text).not.toContain('ab'.repeat(32));
    expect((await t.req('GET', '/v1/status')).status).toBe(401);
    const key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'bot' } })).body.key as string;
    expect((await t.req('GET', '/v1/status', { headers: { 'x-api-key': key } })).status).toBe(401);
  });

  it('exposes on /metrics every series the Overview page reads (a rename would blank it silently)', async () => {
    const src = ['overview.js', '../prom.js'].map((f) => readFileSync(new URL(`../../src/dashboard/static/js/pages/${f}`, import.meta.url), 'utf8')).join('\n');
    const names = [...new Set(src.match(/tagw_[a-z_]+/g))];
    expect(names.length).toBeGreaterThan(5);
    await t.req('GET', '/healthz'); // one request, so the per-family series exist
    const text = (await t.req('GET', '/metrics')).text;
    for (const n of names) expect(text, n).toMatch(new RegExp(`^${n}[{ ]`, 'm'));
  });

  it("lists each account's connection phase with its history, never the broker login", async () => {
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: {} });
    const bound = await t.req('POST', '/ConnectEx', { headers: mgmt(t.managementKey), body: { user: '777123', password: 'pw', server: 'Sim-P4-Demo' } });
    expect(bound.status).toBe(200);
    let r = await t.req('GET', '/v1/accounts/connections', { headers: mgmt(t.managementKey) });
    await until(async () => {
      r = await t.req('GET', '/v1/accounts/connections', { headers: mgmt(t.managementKey) });
      return r.body.accounts.find((a: { id: string }) => a.id === bound.body.id)?.phase === 'connected';
    }, 'the bound account to be connected');
    const byId = Object.fromEntries(r.body.accounts.map((a: { id: string }) => [a.id, a]));
    expect(byId[seat.body.id]).toMatchObject({ platform: null, server: null, phase: null, synced: false, history: [] });
    expect(byId[bound.body.id]).toMatchObject({ platform: 'P4', server: 'Sim-P4-Demo', phase: 'connected', synced: true, lastError: null });
    expect(byId[bound.body.id].history.map((h: { phase: string }) => h.phase)).toEqual(['connecting', 'connected']);
    expect(r.text).not.toContain('777123');
    const status = await t.req('GET', '/v1/status', { headers: mgmt(t.managementKey) });
    expect(status.body.accounts).toMatchObject({ connected: 1 });
    expect(status.body.seats).toBe(2);
  });
});

describe('status: the accounts on each shard', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ shards: 2 });
  });
  afterAll(() => t.stop());

  it("counts every customer's accounts on the shard that runs them, not the operator's only", async () => {
    const other = createCustomer(t.gw.services.tenancy, 'status-other');
    // Counted once before (the count is kept until a seat comes or goes).
    expect((await t.req('GET', '/v1/status', { headers: mgmt(t.managementKey) })).status).toBe(200);
    const ids: string[] = [];
    for (const key of [t.managementKey, other.managementKey, other.managementKey, other.managementKey, other.managementKey]) {
      const r = await t.req('POST', '/v1/seats', { headers: mgmt(key), body: {} });
      expect(r.status, r.text).toBe(201);
      ids.push(r.body.id as string);
    }
    const removed = ids.pop()!;
    expect((await t.req('DELETE', `/v1/seats/${removed}`, { headers: mgmt(other.managementKey) })).status).toBe(200);
    const perShard = [0, 1].map((i) => ids.filter((id) => t.gw.services.shards.shardFor(id) === i).length);
    const status = await t.req('GET', '/v1/status', { headers: mgmt(t.managementKey) });
    expect((status.body.shards as Array<{ accounts: number }>).map((s) => s.accounts)).toEqual(perShard);
    expect(status.body.seats).toBe(1);
    // A seat removed after that count: counted again.
    expect((await t.req('DELETE', `/v1/seats/${ids.pop()!}`, { headers: mgmt(other.managementKey) })).status).toBe(200);
    const after = await t.req('GET', '/v1/status', { headers: mgmt(t.managementKey) });
    expect((after.body.shards as Array<{ accounts: number }>).map((s) => s.accounts)).toEqual([0, 1].map((i) => ids.filter((id) => t.gw.services.shards.shardFor(id) === i).length));
  });
});
