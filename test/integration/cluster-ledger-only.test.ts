// In cluster mode an order's idempotency record is the ledger's in PostgreSQL alone: the owner's
// shard keeps none in its SQLite (it served nothing there: the ledger answers every retry, on any
// node). What stood between a retry and a second send on the owner is FencedShards' own: a retry
// with the id of an order under way on this node waits for it, then meets its record. First on a
// real PostgreSQL with stand-in shards that record each order (and dedup nothing), then one real cluster
// node with its shards and a bridge simulator.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { FencedShards } from '../../src/cluster/fencedShards.js';
import { IdempotencyLedger, type WriteOutcome } from '../../src/cluster/idempotencyLedger.js';
import { acquireLeases, type Lease } from '../../src/cluster/leases.js';
import type { LocalShards } from '../../src/cluster/router.js';
import { ApiError, apiError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import { IDEMPOTENCY_TTL_MS } from '../../src/runtime/hosts/accountTrade.js';
import type { ArgsOf } from '../../src/runtime/protocol.js';
import { useClusterEngines } from '../helpers/cluster.js';
import { EMPTY_START_SETTLE_MS } from '../helpers/engines.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { bindAccount, openedTickets, orderSend } from '../helpers/trading.js';
import { until } from '../helpers/until.js';

const engines = useClusterEngines();
const NOW = 1_700_000_000_000;
let accounts = 0;
type Trade = ArgsOf<'account.trade'>;
const code = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof ApiError ? e.code : String(e)));

/** An owner of one account whose shard holds each order until `answer` and records what reached it. */
async function owner(ledger: IdempotencyLedger = new IdempotencyLedger(engines.pool)) {
  const accountId = `acct-lo-${++accounts}`;
  const [lease] = await acquireLeases(engines.pool, 'a', [accountId], 600_000);
  const sent: Trade[] = [];
  const held: Array<() => void> = [];
  const shards: LocalShards = {
    call: async (_key, _op, args) => {
      const t = args as Trade;
      sent.push(t);
      await new Promise<void>((r) => held.push(r));
      return { status: 200, json: JSON.stringify({ ticket: sent.length }), replay: false } as TradeReply as never;
    },
  };
  const fenced = new FencedShards({ nodeId: 'a', shards, ledger, clock: { now: () => NOW }, log: createLogger('silent'), keeper: { leaseOf: (): Lease => lease! } });
  const trade = (clientOrderId: string, volume = 0.01) => fenced.call(accountId, 'account.trade', {
    accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume }, clientOrderId,
  });
  return { accountId, sent, trade, answer: () => held.shift()!() };
}

describe('the owner without a record in its shard', () => {
  it('a retry of an order still out waits for it and replays its answer; other parameters meanwhile are refused once it is answered; sent once', async () => {
    const o = await owner();
    const first = o.trade('out-1');
    await expect.poll(() => o.sent.length).toBe(1);
    // The shard is told the record is the ledger's, with its expiry (its broker request id's).
    const row = await new IdempotencyLedger(engines.pool).get(o.accountId, 'out-1');
    expect(row).toMatchObject({ state: 'sent', expires_at: NOW + IDEMPOTENCY_TTL_MS });
    expect(o.sent[0]).toMatchObject({ clientOrderId: 'out-1', ledgerExpiresAt: Number(row!.expires_at) });
    const retry = o.trade('out-1');
    const other = code(o.trade('out-1', 0.02));
    await new Promise((r) => setTimeout(r, 50));
    expect(o.sent).toHaveLength(1); // neither went to the shard while the first is out
    o.answer();
    expect(await first).toEqual({ status: 200, json: '{"ticket":1}', replay: false });
    expect(await retry).toEqual({ status: 200, json: '{"ticket":1}', replay: true });
    expect(await other).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(o.sent).toHaveLength(1);
  });

  it('an answer whose outcome PostgreSQL did not take is still the one a retry on this node gets, not a second send', async () => {
    let failNext = true;
    const ledger = new (class extends IdempotencyLedger {
      override recordOutcome(...a: Parameters<IdempotencyLedger['recordOutcome']>): Promise<WriteOutcome> {
        if (!failNext) return super.recordOutcome(...a);
        failNext = false;
        return Promise.reject(new Error('connection terminated'));
      }
    })(engines.pool);
    const o = await owner(ledger);
    const first = o.trade('unrecorded-1');
    await expect.poll(() => o.sent.length).toBe(1);
    o.answer();
    expect(await first).toMatchObject({ status: 200, replay: false });
    expect(await ledger.get(o.accountId, 'unrecorded-1')).toMatchObject({ state: 'sent' });
    expect(await o.trade('unrecorded-1')).toEqual({ status: 200, json: '{"ticket":1}', replay: true });
    expect(o.sent).toHaveLength(1);
  });
});

describe('a send that fails once the order may have gone', () => {
  /** An owner whose shard fails each order with `fail` once `settle` is called, and whose keeper's
   *  view of the lease the test sets (held; lost; held again at another epoch). */
  async function failing(fail: () => Error) {
    const accountId = `acct-lo-${++accounts}`;
    const [lease] = await acquireLeases(engines.pool, 'a', [accountId], 600_000);
    let now: Lease | undefined = lease;
    const held: Array<() => void> = [];
    const shards: LocalShards = {
      call: async () => {
        await new Promise<void>((r) => held.push(r));
        throw fail();
      },
    };
    const fenced = new FencedShards({ nodeId: 'a', shards, ledger: new IdempotencyLedger(engines.pool), clock: { now: () => NOW }, log: createLogger('silent'), keeper: { leaseOf: () => now } });
    const trade = (clientOrderId?: string) => fenced.call(accountId, 'account.trade', {
      accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, ...(clientOrderId === undefined ? {} : { clientOrderId }),
    }).then(() => ({ status: 200 }), (e: unknown) => (e instanceof ApiError ? { status: e.status, code: e.code, retryAfter: e.headers?.['retry-after'] } : { err: String(e) }));
    const settle = async () => {
      await expect.poll(() => held.length).toBe(1);
      held.shift()!();
    };
    return { accountId, lease: lease!, trade, settle, setLease: (l: Lease | undefined) => void (now = l) };
  }
  const lost = () => apiError('TERMINAL_ERROR', 'the order was sent but its outcome is unknown (reply lost)');

  it('its reply lost on an owner that keeps the account: 500 TERMINAL_ERROR, as before; the record uncertain', async () => {
    const o = await failing(lost);
    const a = o.trade('kept-1');
    await o.settle();
    expect(await a).toEqual({ status: 500, code: 'TERMINAL_ERROR', retryAfter: undefined });
    expect(await new IdempotencyLedger(engines.pool).get(o.accountId, 'kept-1')).toMatchObject({ state: 'uncertain' });
  });

  it('the account left the node while it was out (lease lost or handed over, or held again at a new epoch): 503 with retry-after, retry with the same id; an id made here keeps the shard\'s answer', async () => {
    for (const after of ['lost', 'again'] as const) {
      const o = await failing(lost);
      const a = o.trade(`moved-${after}`); // the lease it claims under is read as the call starts
      o.setLease(after === 'lost' ? undefined : { accountId: o.accountId, epoch: o.lease.epoch + 1 });
      await o.settle();
      expect({ after, answer: await a }).toEqual({ after, answer: { status: 503, code: 'SERVICE_UNAVAILABLE', retryAfter: '1' } });
    }
    const o = await failing(lost);
    const a = o.trade();
    o.setLease(undefined);
    await o.settle();
    expect(await a).toEqual({ status: 500, code: 'TERMINAL_ERROR', retryAfter: undefined });
    // Certainly not sent: as it says (the claim freed), wherever the account went.
    const n = await failing(() => apiError('NOT_CONNECTED', 'not sent'));
    const b = n.trade('not-sent-1');
    n.setLease(undefined);
    await n.settle();
    expect(await b).toMatchObject({ status: 503, code: 'NOT_CONNECTED' });
    expect(await new IdempotencyLedger(engines.pool).get(n.accountId, 'not-sent-1')).toBeUndefined();
  });
});

describe('orders with the same ids at once on the owner (property)', () => {
  type Fate = 'ok' | 'notSent' | 'lost';
  const order = fc.record({ id: fc.constantFrom('p1', 'p2', 'p3'), volume: fc.constantFrom(0.01, 0.02), delayMs: fc.integer({ min: 0, max: 3 }) });
  it('an id reaches the shard again only after a send that certainly did not go; every 200 is that send\'s answer; other parameters meet 422 or 409, never the shard', async () => {
    await fc.assert(fc.asyncProperty(fc.array(order, { minLength: 1, maxLength: 8 }), fc.array(fc.constantFrom<Fate>('ok', 'ok', 'notSent', 'lost'), { minLength: 8, maxLength: 8 }), fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 8, maxLength: 8 }),
      async (orders, fates, latencies) => {
        const accountId = `acct-lo-${++accounts}`;
        const [lease] = await acquireLeases(engines.pool, 'a', [accountId], 600_000);
        const sent: Array<{ id: string; volume: number; fate: Fate; ticket: number }> = [];
        const shards: LocalShards = {
          call: async (_key, _op, args) => {
            const t = args as Trade;
            const n = sent.length;
            const fate = fates[n % fates.length]!;
            sent.push({ id: t.clientOrderId!, volume: (t.args as { volume: number }).volume, fate, ticket: 100 + n });
            await new Promise((r) => setTimeout(r, latencies[n % latencies.length]!));
            if (fate === 'notSent') throw apiError('NOT_CONNECTED', 'not sent');
            if (fate === 'lost') throw apiError('TERMINAL_ERROR', 'reply lost');
            return { status: 200, json: JSON.stringify({ ticket: 100 + n }), replay: false } as TradeReply as never;
          },
        };
        const fenced = new FencedShards({ nodeId: 'a', shards, ledger: new IdempotencyLedger(engines.pool), clock: { now: () => NOW }, log: createLogger('silent'), keeper: { leaseOf: (): Lease => lease! } });
        const answers = await Promise.all(orders.map(async (o) => {
          await new Promise((r) => setTimeout(r, o.delayMs));
          return fenced.call(accountId, 'account.trade', { accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: o.volume }, clientOrderId: o.id })
            .then((r) => ({ ok: r }), (e: unknown) => ({ err: e instanceof ApiError ? e.code : String(e) }));
        }));
        for (const id of ['p1', 'p2', 'p3']) {
          const sends = sent.filter((x) => x.id === id);
          // Only certainly-unsent sends may be followed by another one.
          sends.slice(0, -1).forEach((x) => expect(x.fate).toBe('notSent'));
          const went = sends.find((x) => x.fate !== 'notSent');
          orders.forEach((o, i) => {
            if (o.id !== id) return;
            const a = answers[i]!;
            if ('ok' in a) {
              // A 200 is the one send that went, with this order's parameters.
              expect(went?.fate).toBe('ok');
              expect(a.ok.json).toBe(JSON.stringify({ ticket: went!.ticket }));
              expect(o.volume).toBe(went!.volume);
            } else if (a.err === 'IDEMPOTENCY_KEY_REUSED') {
              expect(went).toBeDefined(); // a record of other parameters: a send that went
            } else {
              expect(['NOT_CONNECTED', 'TERMINAL_ERROR', 'IDEMPOTENCY_UNCERTAIN']).toContain(a.err);
            }
          });
          // Exactly one answer was not a replay for the send that went through.
          if (went?.fate === 'ok') expect(answers.filter((a, i) => orders[i]!.id === id && 'ok' in a && !a.ok.replay)).toHaveLength(1);
        }
      }), { numRuns: 40 });
  }, 120_000);
});

describe('a cluster node and its shards', () => {
  let gw: TestGateway | undefined;
  afterAll(async () => {
    await gw?.stop().catch(() => undefined);
  });

  it('an idempotent /OrderSend on the owner is recorded in PostgreSQL and not in the node\'s SQLite; its retry replays, placed once', async () => {
    gw = await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, secretKey: randomBytes(32).toString('hex'),
      natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId: 'node-lo', clusterLeaseMs: 6_000, clusterSettleMs: EMPTY_START_SETTLE_MS, clusterOwnerWaitMs: 5_000,
    });
    const { key, id: account } = await bindAccount(gw.url, gw.managementKey);
    const node = gw;
    await until(() => node.gw.cluster!.owned().includes(account), 'the node to take the account\'s lease');
    await until(async () => (await node.gw.services.shards.call(account, 'account.status', { accountId: account })).phase === 'connected', 'the node to connect the account');

    const first = await orderSend(node.url, key, account, 'lo-1');
    expect(first).toMatchObject({ status: 200, replay: false });
    const again = await orderSend(node.url, key, account, 'lo-1');
    expect(again).toMatchObject({ status: 200, replay: true, ticket: first.ticket });
    expect(await openedTickets(node.url, key, account)).toEqual([first.ticket]);
    const pg = await engines.pool.query('SELECT state, status FROM idempotency WHERE account_id = $1 AND client_order_id = $2', [account, 'lo-1']);
    expect(pg.rows).toEqual([{ state: 'result', status: 200 }]);
    const sqlite = new Database(join(node.dataDir, 'tagw.sqlite'), { readonly: true, fileMustExist: true });
    try {
      expect(sqlite.prepare('SELECT count(*) AS n FROM idempotency').get()).toEqual({ n: 0 });
    } finally {
      sqlite.close();
    }
  }, 90_000);
});
