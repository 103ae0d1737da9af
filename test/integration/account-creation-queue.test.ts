// The node's admission queue of broker logins (ACCOUNT_CREATION_CONCURRENCY, ACCOUNT_CREATION_QUEUE;
// docs/scale.md, "The main thread during a creation ramp"): a customer creating accounts in bulk is
// paced, not let take the CPU from every other customer's quotes. Through the real server, with the
// shard held down so the logins stay in flight: at most `concurrency` run, `queue` more of a key
// wait in arrival order, and one more of that key is answered at once 429 ACCOUNT_CREATION_BUSY with
// retry-after (/ConnectEx and POST /v1/broker-accounts alike), having created nothing; another key's
// (another bot's /ConnectEx, the operator's POST /v1/seats) waits, and the keys are served in turn:
// one bot's bulk creation holds another's up by one login, not by its queue. A login already bound
// answers at once all the same (/ConnectEx at every bot start); the waiting ones finish once the
// shard is back, and the refused one, sent again, is created.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountCreations } from '../../src/http/routes/classicBinding.js';
import { allowShardUp, keepShardDown, mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { until } from '../helpers/until.js';

let t: TestGateway;
let key: string;
let otherKey: string;
beforeAll(async () => {
  t = await startTestGateway({ shards: 1, accountCreationConcurrency: 1, accountCreationQueue: 2 }, { downableShards: true });
  key = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'bulk' } })).body.key as string;
  otherKey = (await t.req('POST', '/v1/keys', { headers: mgmt(t.managementKey), body: { label: 'other bot' } })).body.key as string;
});
afterAll(async () => {
  await t?.stop();
});

const connectEx = (user: string, k = key) => t.req('POST', '/ConnectEx', { headers: { 'x-api-key': k }, body: { user, password: 'pw', server: 'Sim-P5-Demo' } });
const seatCount = async () => ((await t.req('GET', '/v1/seats', { headers: mgmt(t.managementKey) })).body.seats as unknown[]).length;

describe('the admission queue of account creations', () => {
  it('runs one, queues two of a key, refuses its next with 429 ACCOUNT_CREATION_BUSY and retry-after, creating nothing; queues other keys; serves the keys in turn', async () => {
    const early = await connectEx('early');
    expect(early.status).toBe(200);
    const queue = accountCreations(t.gw.services);
    expect(queue.state).toEqual({ active: 0, queued: 0 });

    const shards = t.gw.services.shards;
    const restarts = shards.restarts();
    keepShardDown(t, 0);
    await shards.kill(0);
    await until(() => shards.restarts() > restarts, 'shard 0 down');

    const done: string[] = [];
    const track = <T>(name: string, p: Promise<T>) => p.then((r) => (done.push(name), r));
    const first = track('first', connectEx('first'));
    await until(() => queue.state.active === 1, 'the first login running');
    const second = track('second', connectEx('second'));
    await until(() => queue.state.queued === 1, 'the second login waiting');
    const third = track('third', connectEx('third'));
    await until(() => queue.state.queued === 2, 'the third login waiting');

    for (const refused of [
      await connectEx('fourth'),
      await t.req('POST', '/v1/broker-accounts', { headers: { 'x-api-key': key }, body: { user: 'broker-account', password: 'pw', server: 'Sim-P5-Demo', platform: 'P5' } }),
    ]) {
      expect(refused.status, JSON.stringify(refused.body)).toBe(429);
      expect(refused.body.error).toBe('ACCOUNT_CREATION_BUSY');
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body.retryAfterMs).toBe(1000);
    }
    expect(queue.state).toEqual({ active: 1, queued: 2 });
    // Another bot's key, and the operator's seat with a login: waiting, not refused.
    const other = track('other', connectEx('other-bot', otherKey));
    await until(() => queue.state.queued === 3, "the other key's login waiting");
    const seat = track('seat', t.req('POST', '/v1/seats', { headers: mgmt(t.managementKey), body: { privateHosting: false, user: 'seat-login', password: 'pw', server: 'Sim-P5-Demo' } }));
    await until(() => queue.state.queued === 4, "the operator's login waiting");
    // The operator sees it in /metrics: running, waiting, refused.
    const metric = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await t.req('GET', '/metrics')).text)?.[1]);
    expect([await metric('tagw_account_creations_running'), await metric('tagw_account_creations_queued'), await metric('tagw_account_creations_refused_total')]).toEqual([1, 4, 2]);
    // A login bound already is not a creation: answered at once, the queue full or not.
    const again = await connectEx('early');
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(early.body.id);

    allowShardUp(t, 0);
    const made = await Promise.all([first, second, third, other, seat]);
    expect(made.map((r) => r.status)).toEqual([200, 200, 200, 200, 201]);
    // In turn: the bulk key's second, then each other key's, then its third (in arrival order: second, third, other, seat).
    expect(done).toEqual(['first', 'second', 'other', 'seat', 'third']);
    expect(queue.state).toEqual({ active: 0, queued: 0 });
    expect([await metric('tagw_account_creations_running'), await metric('tagw_account_creations_queued')]).toEqual([0, 0]);
    const fourth = await connectEx('fourth');
    expect(fourth.status).toBe(200);
    expect(new Set([early.body.id, ...made.slice(0, 4).map((r) => r.body.id), made[4]!.body.id, fourth.body.id]).size).toBe(7);
    // Those seven only: the refused broker account was never made, nor 'fourth' twice.
    expect(await seatCount()).toBe(7);
  });
});
