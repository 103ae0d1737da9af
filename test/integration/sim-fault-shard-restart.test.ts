// An operator's simulator faults (POST /v1/sim/faults) outlive the restart of one shard. Each shard
// thread runs its own simulator, so such a fault is set in every shard; a shard whose thread died
// (a crash, a failed commit) came back with none, while the others kept theirs: the fault acted on
// the accounts of some shards only (a load test's latency gone for a third of them), and GET listed
// it on the other shards only. The main thread keeps what it set and sets it again in a restarted
// shard, for what is left of its duration; cleared, it is not set again; set while the shard was
// down, it is set there once; one with a count (each shard's own) is not set again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowShardUp, keepShardDown, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway({ shards: 2 }, { downableShards: true });
});
afterAll(async () => {
  await t?.stop();
});

type Listed = { shard: number; server: string; kind: string; durationMs?: number };
const h = () => mgmt(t.managementKey);
const listed = async () => ((await t.req('GET', '/v1/sim/faults', { headers: h() })).body.faults as Listed[]);
const onShard = async (shard: number) => (await listed()).filter((f) => f.shard === shard).map((f) => `${f.server} ${f.kind}`).sort();
async function restart(shard: number): Promise<void> {
  const shards = t.gw.services.shards;
  const restarts = shards.restarts();
  await shards.kill(shard);
  await until(() => shards.restarts() > restarts && shards.allReady(), `shard ${shard} back`);
}

describe("the operator's simulator faults and a shard's restart", () => {
  it('are set again in the restarted shard, for what is left of their duration; cleared ones are not', async () => {
    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 20 } })).status).toBe(201);
    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P4-Demo', kind: 'mute', durationMs: 600_000 } })).status).toBe(201);
    const both = ['Sim-P4-Demo mute', 'Sim-P5-Demo latency'];
    expect([await onShard(0), await onShard(1)]).toEqual([both, both]);

    // A count is each shard's own, gone with its thread: not set again (a used-up one would act again).
    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', kind: 'reject', count: 3 } })).status).toBe(201);

    await restart(1);
    await until(async () => (await onShard(1)).length === 2, 'the faults set again in shard 1', 5_000).catch(() => undefined);
    expect([await onShard(0), await onShard(1)]).toEqual([[...both, 'Sim-P5-Demo reject'], both]);
    const mute = (await listed()).find((f) => f.shard === 1 && f.kind === 'mute')!;
    expect(mute.durationMs).toBeGreaterThan(500_000);
    expect(mute.durationMs).toBeLessThanOrEqual(600_000);

    expect((await t.req('DELETE', '/v1/sim/faults?server=Sim-P5-Demo', { headers: h() })).body).toEqual({ cleared: 3 });
    await restart(0);
    await until(async () => (await onShard(0)).length > 0, 'the faults set again in shard 0', 5_000).catch(() => undefined);
    expect([await onShard(0), await onShard(1)]).toEqual([['Sim-P4-Demo mute'], ['Sim-P4-Demo mute']]);
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: h() })).body).toEqual({ cleared: 2 });
  });

  it('set while a shard is down: set there once it is up, once', async () => {
    const shards = t.gw.services.shards;
    const restarts = shards.restarts();
    keepShardDown(t, 1);
    await shards.kill(1);
    await until(() => shards.restarts() > restarts, 'shard 1 down');
    const set = t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', kind: 'latency', latencyMs: 20 } });
    await new Promise((r) => setTimeout(r, 300));
    allowShardUp(t, 1);
    expect((await set).status).toBe(201);
    await until(() => shards.allReady(), 'shard 1 up');
    await new Promise((r) => setTimeout(r, 300));
    expect([await onShard(0), await onShard(1)]).toEqual([['Sim-P5-Demo latency'], ['Sim-P5-Demo latency']]);
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: h() })).body).toEqual({ cleared: 2 });
  });
});
