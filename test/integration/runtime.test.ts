import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { shardOf } from '../../src/runtime/protocol.js';
import { mgmt, shardActors, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('shard supervision', () => {
  let t: TestGateway;
  beforeAll(async () => {
    // The seat must still be building when its shard has been killed, restarted and read, however
    // slow the machine: a build of 5 s ended first at load ~25, the seat read ACTIVE with no actor.
    // 10 minutes cannot end during the test; the test finishes the build itself (seat.prepared).
    t = await startTestGateway({ shards: 2, seatBuildMs: 600_000 });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('routes every account to one stable shard', () => {
    const id = '3f0c7c1e-5b7a-4c55-9d0e-1b2b3c4d5e6f';
    expect(shardOf(id, 2)).toBe(shardOf(id, 2));
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[shardOf(`acct-${i}`, 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
  });

  it('a killed shard worker is restarted, its actors rehydrated, and requests resume', async () => {
    const seat = await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: true } });
    expect(seat.body.status).toBe('BUILDING_SERVER');
    const shard = t.gw.services.shards.shardFor(seat.body.id);
    const before = await t.gw.services.shards.callShard(shard, 'shard.ping', {});
    const threadBefore = t.gw.services.shards.threadId(shard);
    const restartsBefore = t.gw.services.shards.restarts();
    // Announced once the new thread is up: it takes commands then (what the stream hub and the
    // near sources act on).
    // Its death is announced at once, before any new thread is up (what the stream sockets act on).
    const died = new Promise<{ shard: number; up: boolean; restarts: number }>((resolve) => {
      const off = t.gw.services.shards.onDeath((s) => {
        off();
        resolve({ shard: s, up: t.gw.services.shards.health()[s]!.ready, restarts: t.gw.services.shards.restarts() });
      });
    });
    const announced = new Promise<{ shard: number; up: boolean; newThread: boolean; restarts: number }>((resolve) => {
      const off = t.gw.services.shards.onRestart((s) => {
        off();
        const shards = t.gw.services.shards;
        resolve({ shard: s, up: shards.health()[s]!.ready, newThread: shards.threadId(s) !== threadBefore, restarts: shards.restarts() });
      });
    });

    await t.gw.services.shards.kill(shard);
    // A request issued while the shard is down waits for the restart instead of failing.
    const during = await t.req('GET', `/v1/seats/${seat.body.id}`, { headers: mgmt(t.managementKey) });
    expect(during.status).toBe(200);
    expect(during.body.status).toBe('BUILDING_SERVER');
    expect(t.gw.services.shards.restarts()).toBe(restartsBefore + 1);
    expect(t.gw.services.shards.threadId(shard)).not.toBe(threadBefore);
    expect(await died).toEqual({ shard, up: false, restarts: restartsBefore + 1 });
    expect(await announced).toEqual({ shard, up: true, newThread: true, restarts: restartsBefore + 1 });
    const after = await t.gw.services.shards.callShard(shard, 'shard.ping', {});
    expect(after.actors).toBeGreaterThanOrEqual(1);
    expect(before.shard).toBe(after.shard);
    // The rehydrated seat keeps the time its build was promised for: not started over.
    expect(during.body.readyAt).toBe(seat.body.readyAt);

    // The rehydrated seat actor completes its build (its server built now: the event its timer's
    // end stands for; the timer after a restart is the whole-gateway test's below): it turns
    // ACTIVE, writes it, and holds no actor any more.
    const prepared = await t.gw.services.shards.call(seat.body.id, 'seat.prepared', { seatId: seat.body.id });
    expect(prepared?.status).toBe('ACTIVE');
    const last = await t.req('GET', `/v1/seats/${seat.body.id}`, { headers: mgmt(t.managementKey) });
    expect(last.body).toMatchObject({ status: 'ACTIVE', serverBuilding: false, readyAt: seat.body.readyAt });
    expect((await t.gw.services.shards.callShard(shard, 'shard.ping', {})).actors).toBe(after.actors - 1);
    const ready = await t.req('GET', '/readyz');
    expect(ready.status).toBe(200);
  });
});

describe('restart of the whole gateway', () => {
  it('an ACTIVE seat holds no actor, before or after a restart, and still reads ACTIVE', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tagw-restart-'));
    try {
      const a = await startTestGateway({}, { dataDir });
      const before = await shardActors(a);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const seat = await a.req('POST', '/v1/seats', { headers: mgmt(a.managementKey), body: {} });
        expect(seat.body.status).toBe('ACTIVE');
        ids.push(seat.body.id);
      }
      expect(await shardActors(a)).toBe(before);
      await a.stop();
      const b = await startTestGateway({}, { dataDir });
      try {
        expect(await shardActors(b)).toBe(0);
        for (const id of ids) {
          const r = await b.req('GET', `/v1/seats/${id}`, { headers: mgmt(b.managementKey) });
          expect(r.body).toMatchObject({ id, status: 'ACTIVE' });
        }
        expect(await shardActors(b)).toBe(0);
      } finally {
        await b.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a seat that was building when the gateway stopped becomes ACTIVE after it starts again', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tagw-restart-'));
    try {
      const a = await startTestGateway({ seatBuildMs: 800 }, { dataDir });
      const seat = await a.req('POST', '/v1/seats', { headers: mgmt(a.managementKey), body: { privateHosting: true } });
      expect(seat.body.status).toBe('BUILDING_SERVER');
      await a.stop();
      const b = await startTestGateway({ seatBuildMs: 800 }, { dataDir });
      try {
        const mid = await b.req('GET', `/v1/seats/${seat.body.id}`, { headers: mgmt(b.managementKey) });
        expect(mid.status).toBe(200);
        let last = mid;
        for (let i = 0; i < 300 && last.body.status !== 'ACTIVE'; i++) {
          await wait(50);
          last = await b.req('GET', `/v1/seats/${seat.body.id}`, { headers: mgmt(b.managementKey) });
        }
        expect(last.body).toMatchObject({ status: 'ACTIVE', serverBuilding: false });
        // The preparation time is kept, not restarted: readyAt is what the first start promised.
        expect(last.body.readyAt).toBe(seat.body.readyAt);
      } finally {
        await b.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
