// The node's admission queue of broker logins (ACCOUNT_CREATION_CONCURRENCY, ACCOUNT_CREATION_QUEUE;
// docs/scale.md, "The main thread during a creation ramp"): a customer creating accounts in bulk is
// paced, not let take the CPU from every other customer's quotes. Through the real server, with the
// shard held down so the logins stay in flight: at most `concurrency` run, `queue` more wait in
// arrival order, and one more is answered at once 429 ACCOUNT_CREATION_BUSY with retry-after
// (/ConnectEx, POST /v1/seats and POST /v1/broker-accounts alike), having created nothing. A login
// already bound answers at once all the same (/ConnectEx at every bot start); the waiting ones
// finish once the shard is back, and the refused one, sent again, is created.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountCreations } from '../../src/http/routes/classicBinding.js';
import { allowShardUp, keepShardDown, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
let key: string;
beforeAll(async () => {
  t = await startTestGateway({ shards: 1, accountCreationConcurrency: 1, accountCreationQueue: 1 }, { downableShards: true });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'bulk' } })).body.key as string;
});
afterAll(async () => {
  await t?.stop();
});

const connectEx = (user: string) => t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user, password: 'pw', server: 'Sim-P5-Demo' } });
const seatCount = async () => ((await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) })).body.seats as unknown[]).length;

describe('the admission queue of account creations', () => {
  it('runs one, queues one, refuses the next with 429 ACCOUNT_CREATION_BUSY and retry-after, creating nothing; then serves the queue in order', async () => {
    const early = await connectEx('early');
    expect(early.status).toBe(200);
    const queue = accountCreations(t.gw.services);
    expect(queue.state).toEqual({ active: 0, queued: 0 });

    const shards = t.gw.services.shards;
    const restarts = shards.restarts();
    keepShardDown(t, 0);
    await shards.kill(0);
    await until(() => shards.restarts() > restarts, 'shard 0 down');

    const first = connectEx('first');
    await until(() => queue.state.active === 1, 'the first login running');
    const second = connectEx('second');
    await until(() => queue.state.queued === 1, 'the second login waiting');

    for (const refused of [
      await connectEx('third'),
      await t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: false, user: 'seat-login', password: 'pw', server: 'Sim-P5-Demo' } }),
      await t.req('POST', '/v1/broker-accounts', { headers: { 'x-api-key': key }, body: { user: 'broker-account', password: 'pw', server: 'Sim-P5-Demo', platform: 'P5' } }),
    ]) {
      expect(refused.status, JSON.stringify(refused.body)).toBe(429);
      expect(refused.body.error).toBe('ACCOUNT_CREATION_BUSY');
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body.retryAfterMs).toBe(1000);
    }
    expect(queue.state).toEqual({ active: 1, queued: 1 });
    // A login bound already is not a creation: answered at once, the queue full or not.
    const again = await connectEx('early');
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(early.body.id);

    allowShardUp(t, 0);
    const [a, b] = await Promise.all([first, second]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(queue.state).toEqual({ active: 0, queued: 0 });
    const third = await connectEx('third');
    expect(third.status).toBe(200);
    expect(new Set([early.body.id, a.body.id, b.body.id, third.body.id]).size).toBe(4);
    // Those four only: the refused seat and broker account were never made, nor 'third' twice.
    expect(await seatCount()).toBe(4);
  });
});
