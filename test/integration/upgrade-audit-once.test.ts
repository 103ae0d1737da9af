// One node: an upgrade's audit row is written in the shard's transaction with the build it records
// (76dc7aa). A shard that dies after that commit and before it answered is restarted, and the call
// re-sent to it (retryOnRestart): the row carries the request's reference (audit_log.ref, unique,
// migration 14), so the second run writes no second row. Real gateway, real shard workers, real
// SQLite; the embedded simulator's drop fault holds the upgrade's new login open after the commit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
beforeAll(async () => {
  // The upgrade waits this long for its new connection (the drop holds it): the shard is killed meanwhile.
  t = await startTestGateway({ bindWaitMs: 10_000 });
});
afterAll(async () => {
  await t.stop();
});

describe('an upgrade re-sent after a shard restart', () => {
  it('writes its audit row once (its reference), and the build it records', async () => {
    const h = mgmt(t.managementKey);
    const key = (await t.req('POST', '/v1/keys', { headers: h, body: { label: 'upgrade-once' } })).body.key as string;
    const bound = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'upgrade-once', password: 'pw', server: 'Sim-P5-Demo' } });
    expect(bound.status).toBe(200);
    const id = bound.body.id as string;
    const db = t.gw.services.db;
    const rows = () => db.prepare("SELECT * FROM audit_log WHERE action = 'account.upgrade' AND target = ?").all(id) as Array<{ ref?: string | null }>;

    expect((await t.req('POST', `/v1/accounts/${id}/faults`, { headers: h, body: { kind: 'drop', durationMs: 5_000 } })).status).toBe(201);
    const upgraded = fetch(`${t.url}/v1/accounts/${id}/upgrade`, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: JSON.stringify({ build: 4400 }) });
    // Committed (the build and its row), the shard now waiting for the new login: it dies.
    await until(() => rows().length === 1, 'the upgrade\'s row committed by the shard');
    const shards = t.gw.services.shards;
    await shards.kill(shards.shardFor(id));

    const r = await upgraded;
    expect(r.status, await r.clone().text()).toBe(200);
    expect((await r.json() as { build: number }).build).toBe(4400);
    // Before: two rows (the re-sent call wrote its own).
    expect(rows()).toHaveLength(1);
    expect(rows()[0]!.ref).toMatch(/^[0-9a-f-]{36}$/);
    const audit = (await t.req('GET', '/v1/audit?limit=1000', { headers: h })).body.entries as Array<{ action: string; target: string }>;
    expect(audit.filter((e) => e.target === id && e.action === 'account.upgrade')).toHaveLength(1);
  });
});
