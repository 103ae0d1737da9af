// An operator's simulator faults (POST /v1/sim/faults) act once for the gateway and outlive the
// restart of one shard. Each shard
// thread runs its own simulator, so such a fault is set in every shard; a shard whose thread died
// (a crash, a failed commit) came back with none, while the others kept theirs: the fault acted on
// the accounts of some shards only (a load test's latency gone for a third of them), and GET listed
// it on the other shards only. The main thread keeps what it set and sets it again in a restarted
// shard, for what is left of its duration; cleared, it is not set again; set while the shard was
// down, it is set there once. A count was each shard's own (count 2 took 2 trades in each shard):
// the shards now share one (a SharedArrayBuffer), which goes on after a shard's restart.
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

    // A count the shards share goes on there too (what is left of it: the last test).
    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', kind: 'reject', count: 3 } })).status).toBe(201);
    const three = [...both, 'Sim-P5-Demo reject'];

    await restart(1);
    await until(async () => (await onShard(1)).length === 3, 'the faults set again in shard 1', 5_000).catch(() => undefined);
    expect([await onShard(0), await onShard(1)]).toEqual([three, three]);
    const mute = (await listed()).find((f) => f.shard === 1 && f.kind === 'mute')!;
    expect(mute.durationMs).toBeGreaterThan(500_000);
    expect(mute.durationMs).toBeLessThanOrEqual(600_000);

    expect((await t.req('DELETE', '/v1/sim/faults?server=Sim-P5-Demo', { headers: h() })).body).toEqual({ cleared: 4 });
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

  it("a count is the gateway's, not each shard's: N trades taken across shards, and after a shard's restart the count goes on", async () => {
    const key = (await t.req('POST', '/v1/keys', { headers: h(), body: { label: 'count' } })).body.key as string;
    const byShard = new Map<number, string>();
    for (let i = 0; byShard.size < 2; i++) {
      const id = (await t.req('POST', '/ConnectEx', { headers: h(), body: { user: `count-${i}`, password: 'pw', server: 'Sim-P5-Demo' } })).body.id as string;
      byShard.set(t.gw.services.shards.shardFor(id), id);
    }
    const accounts = [byShard.get(0)!, byShard.get(1)!];
    let n = 0;
    const rejected = async (id: string) => {
      const r = await t.req('GET', `/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=count-${n++}`, { headers: { 'x-api-key': key } });
      expect([200, 400], r.text).toContain(r.status);
      return r.status === 400 ? 1 : 0;
    };
    const round = async () => (await rejected(accounts[0]!)) + (await rejected(accounts[1]!));

    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', kind: 'reject', count: 2 } })).status).toBe(201);
    let taken = 0;
    for (let i = 0; i < 4; i++) taken += await round();
    expect(taken).toBe(2);

    expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', kind: 'reject', count: 3 } })).status).toBe(201);
    taken = await rejected(accounts[0]!);
    expect(taken).toBe(1);
    await restart(1);
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 4; i++) taken += await round();
    expect(taken).toBe(3);
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: h() })).status).toBe(200);
  });

  it("the operator's fault on a login, ended by the account's customer, ends in every shard, and a restart does not bring it back", async () => {
    const id = (await t.req('POST', '/ConnectEx', { headers: h(), body: { user: 'cleared-login', password: 'pw', server: 'Sim-P5-Demo' } })).body.id as string;
    const shard = t.gw.services.shards.shardFor(id);
    const set = async () => expect((await t.req('POST', '/v1/sim/faults', { headers: h(), body: { server: 'Sim-P5-Demo', login: 'cleared-login', kind: 'latency', latencyMs: 20 } })).status).toBe(201);
    await set();
    expect(await listed()).toHaveLength(2);
    expect((await t.req('DELETE', `/v1/accounts/${id}/faults`, { headers: h() })).body).toEqual({ cleared: 1 });
    expect(await listed()).toEqual([]);
    await restart(shard);
    await new Promise((r) => setTimeout(r, 300));
    expect(await listed()).toEqual([]);

    // One of them by the id the account's GET gave: the same, the others kept.
    await set();
    await set();
    const ids = ((await t.req('GET', `/v1/accounts/${id}/faults`, { headers: h() })).body.faults as Array<{ id: number }>).map((f) => f.id);
    expect(ids).toHaveLength(2);
    expect((await t.req('DELETE', `/v1/accounts/${id}/faults?faultId=${ids[0]}`, { headers: h() })).body).toEqual({ cleared: 1 });
    expect((await listed()).map((f) => f.shard).sort()).toEqual([0, 1]);
    expect((await t.req('DELETE', '/v1/sim/faults', { headers: h() })).body).toEqual({ cleared: 2 });
  });
});
