// The owner's trade path in cluster mode (src/cluster/fencedShards.ts) on a real PostgreSQL: the
// fenced claim before the shard, the outcome after, and what a retry on another node gets. The
// shards are a recording stand-in for the broker: what matters is which orders reached it.
import { describe, expect, it } from 'vitest';
import { COMMAND_REACH, reachOf } from '../../src/cluster/commandReach.js';
import { FencedShards } from '../../src/cluster/fencedShards.js';
import { IdempotencyLedger } from '../../src/cluster/idempotencyLedger.js';
import { acquireLeases, type Lease } from '../../src/cluster/leases.js';
import { LeaseKeeper } from '../../src/cluster/leaseKeeper.js';
import { openPgPool } from '../../src/cluster/pgPool.js';
import type { LocalShards } from '../../src/cluster/router.js';
import { ApiError, apiError } from '../../src/errors.js';
import { createLogger } from '../../src/log.js';
import type { TradeReply } from '../../src/runtime/hosts/accountCommands.js';
import type { ArgsOf, CommandName } from '../../src/runtime/protocol.js';
import { freePort } from '../helpers/engines.js';
import { postgresForFile } from '../helpers/postgres.js';

const server = postgresForFile();
let accounts = 0;
/** The broker behind every node's shards: the answer of each order it executed, by account and id,
 *  for 'account.lookupTrade' (a new owner asking about an order an earlier owner sent). */
const executed = new Map<string, TradeReply>();


type Trade = ArgsOf<'account.trade'>;

/** A node: its leases (held as given, valid until `lapsed`), and shards that record each order. */
function node(id: string) {
  const leases = new Map<string, Lease>();
  const sent: Trade[] = [];
  /** Every command that reached the shards. */
  const ops: string[] = [];
  let next: ((t: Trade) => Promise<TradeReply>) | undefined;
  const shards: LocalShards = {
    call: async (_key, op, args) => {
      ops.push(op);
      if (op === 'account.lookupTrade') {
        const l = args as ArgsOf<'account.lookupTrade'>;
        return (executed.get(`${l.accountId}/${l.clientOrderId}`) ?? null) as never;
      }
      if (op !== 'account.trade') return { passed: op } as never;
      const t = args as Trade;
      sent.push(t);
      let reply: TradeReply = { status: 200, json: JSON.stringify({ ticket: sent.length, by: id }), replay: false };
      if (next) {
        const f = next;
        next = undefined;
        reply = await f(t);
      }
      executed.set(`${t.accountId}/${t.clientOrderId}`, reply);
      return reply as never;
    },
  };
  const state = { lapsed: false };
  const ledger = new IdempotencyLedger(server.pool);
  const fenced = new FencedShards({
    nodeId: id, shards, ledger, clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent'),
    keeper: { leaseOf: (a) => (state.lapsed ? undefined : leases.get(a)) },
  });
  return {
    id, leases, sent, ops, fenced, state, ledger,
    /** The next order's shard answer (or failure), once. */
    answerNext(f: (t: Trade) => Promise<TradeReply>) {
      next = f;
    },
    trade: (accountId: string, clientOrderId?: string, volume = 0.01) => fenced.call(accountId, 'account.trade', {
      accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume }, ...(clientOrderId === undefined ? {} : { clientOrderId }),
    }),
  };
}

async function ownedBy(n: ReturnType<typeof node>): Promise<string> {
  const accountId = `acct-${++accounts}`;
  const [lease] = await acquireLeases(server.pool, n.id, [accountId], 600_000);
  n.leases.set(accountId, lease!);
  return accountId;
}
async function takeOver(accountId: string, to: ReturnType<typeof node>): Promise<void> {
  await server.pool.query(`UPDATE account_leases SET expires_at = now() - interval '1 millisecond' WHERE account_id = $1`, [accountId]);
  const [lease] = await acquireLeases(server.pool, to.id, [accountId], 600_000);
  to.leases.set(accountId, lease!);
}
const code = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof ApiError ? e.code : String(e)));

describe('changes of an account that are no order, on the owner', () => {
  it('run only while PostgreSQL says the owner holds the lease at its epoch: on an owner whose lease moved on there (its own clock still believing it) a re-bind, an upgrade, a session made, subscribed or ended reach no shard; reads still go', async () => {
    const a = node('stale-owner');
    const acct = await ownedBy(a);
    const changes: Array<[CommandName, unknown]> = [
      ['account.bind', { accountId: acct, customerId: 'c', server: 'Sim-P5-Demo', login: 'x', passwordEnc: 'sealed' }],
      ['account.upgrade', { accountId: acct, build: 4321 }],
      ['session.connect', { accountId: acct }],
      ['session.op', { key: 'h', op: 'Subscribe', args: { symbol: 'BTCUSD' } }],
      ['session.op', { key: 'h', op: 'Disconnect', args: {} }],
    ];
    for (const [op, args] of changes) expect(await a.fenced.call(acct, op, args as never)).toEqual({ passed: op });
    // Its lease taken back under its NODE_ID by a newer process (leases.ts reclaimLeases: epoch+1):
    // this process's keeper still holds the old epoch until its next renewal.
    await server.pool.query('UPDATE account_leases SET epoch = epoch + 1 WHERE account_id = $1', [acct]);
    a.ops.length = 0;
    for (const [op, args] of changes) expect(await code(a.fenced.call(acct, op, args as never)), op).toBe('SERVICE_UNAVAILABLE');
    // Before: every one of them reached the shard (and the broker: a probe login, a new connection).
    expect(a.ops).toEqual([]);
    // Reads and stream commands keep the own-clock check only (no round trip per quote).
    expect(await a.fenced.call(acct, 'account.op', { accountId: acct, op: 'GetQuote', args: { symbol: 'BTCUSD' } })).toEqual({ passed: 'account.op' });
    expect(await a.fenced.call(acct, 'session.op', { key: 'h', op: 'AccountSummary', args: {} } as never)).toEqual({ passed: 'session.op' });
    expect(a.ops).toEqual(['account.op', 'session.op']);
  });
});

describe('fenced trades on the owner', () => {
  it('a broker answer that cannot be recorded (a reply not of its shape) still settles the claim: uncertain, nothing left open on the node, a retry answers 409 and sends nothing', async () => {
    const a = node('unrecordable');
    const accountId = await ownedBy(a);
    a.answerNext(async () => undefined as never);
    expect(await code(a.trade(accountId, 'odd-1'))).not.toBe('ok');
    expect((await a.ledger.get(accountId, 'odd-1'))?.state).toBe('uncertain');
    expect(a.ledger.openClaims).toBe(0);
    // Before, the record stayed 'sent' at this epoch and the node's ledger kept its claim open.
    expect(await code(a.trade(accountId, 'odd-1'))).toBe('IDEMPOTENCY_UNCERTAIN');
    expect(a.sent).toHaveLength(1);
  });

  it('with a short lease, a trade goes while the lease holds for the dispatch margin, also between renewals; not in its last moments', async () => {
    const clock = { t: 5_000, now() { return this.t; } };
    const accountId = `acct-${++accounts}`;
    const keeper = new LeaseKeeper({ db: server.pool, nodeId: 'k', leaseMs: 1_500, clock, accounts: () => [accountId] });
    await keeper.tick(); // valid until 6_500 on this clock; renewals due every 500 ms
    const sent: string[] = [];
    const fenced = new FencedShards({
      nodeId: 'k', keeper, ledger: new IdempotencyLedger(server.pool), clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent'),
      shards: { call: async (_k, _op, args) => (sent.push((args as Trade).clientOrderId!), { status: 200, json: '{}', replay: false }) as never },
    });
    const trade = (id: string) => fenced.call(accountId, 'account.trade', { accountId, op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, clientOrderId: id });
    clock.t = 5_600; // a renewal 100 ms late: 900 ms of lease left
    expect(await trade('between-renewals')).toMatchObject({ status: 200 });
    clock.t = 6_300; // 200 ms left: less than the margin
    expect(await code(trade('last-moment'))).toBe('SERVICE_UNAVAILABLE');
    expect(sent).toEqual(['between-renewals']);
    await keeper.stop({ handover: true });
  });

  it('claims before the shard and records after: a retry replays without reaching the broker; other parameters are refused', async () => {
    const a = node('a');
    const acct = await ownedBy(a);
    const first = await a.trade(acct, 'o1');
    expect(first).toMatchObject({ status: 200, replay: false });
    expect(await a.trade(acct, 'o1')).toEqual({ ...first, replay: true });
    expect(await code(a.trade(acct, 'o1', 0.02))).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(a.sent.map((t) => t.clientOrderId)).toEqual(['o1']);
    // No id from the client: one is made, so the order is claimed (and fenced) too.
    await a.trade(acct);
    expect(a.sent[1]!.clientOrderId).toMatch(/^c-[0-9a-f-]{36}$/);
    expect((await new IdempotencyLedger(server.pool).get(acct, a.sent[1]!.clientOrderId!))?.state).toBe('result');
    // Not a trade: passed through untouched.
    expect(await a.fenced.call(acct, 'account.check', { accountId: acct })).toEqual({ passed: 'account.check' });
  });

  it('a refusal before sending frees the id; an unknown outcome makes every later retry, on any node, a 409', async () => {
    const a = node('a');
    const b = node('b');
    const acct = await ownedBy(a);
    a.answerNext(() => Promise.reject(apiError('NOT_CONNECTED', 'broker connection down')));
    expect(await code(a.trade(acct, 'x'))).toBe('NOT_CONNECTED');
    expect(await a.trade(acct, 'x')).toMatchObject({ status: 200, replay: false }); // sent now, once
    a.answerNext(() => Promise.reject(new Error('shard crashed mid-call')));
    expect(await code(a.trade(acct, 'y'))).toBe('Error: shard crashed mid-call');
    await takeOver(acct, b);
    expect(await code(b.trade(acct, 'y'))).toBe('IDEMPOTENCY_UNCERTAIN');
    expect(b.sent).toEqual([]);
  });

  it('an owner past its lease sends nothing; a takeover during a broker call leaves the order uncertain for the new owner until the broker knows it, then replays its answer; never sent twice', async () => {
    const a = node('a');
    const b = node('b');
    const acct = await ownedBy(a);
    a.state.lapsed = true;
    expect(await code(a.trade(acct, 'late'))).toBe('SERVICE_UNAVAILABLE');
    a.state.lapsed = false;

    let brokerAnswers!: () => void;
    a.answerNext(() => new Promise((resolve) => {
      brokerAnswers = () => resolve({ status: 200, json: '{"ticket":99}', replay: false });
    }));
    const slow = a.trade(acct, 'slow');
    await expect.poll(() => a.sent.length).toBe(1); // at the broker
    await takeOver(acct, b);
    // Not executed yet as far as the broker can say: 409, nothing sent.
    expect(await code(b.trade(acct, 'slow'))).toBe('IDEMPOTENCY_UNCERTAIN');
    brokerAnswers();
    expect(await slow).toMatchObject({ status: 200, json: '{"ticket":99}' }); // the client that sent it still gets its answer
    expect((await a.ledger.get(acct, 'slow'))?.state).toBe('sent'); // a's late outcome was fenced out
    // The broker knows it now: b asks it (as one node does after a restart), records and replays its
    // answer; the next retry replays the record without asking. Before, every retry answered 409.
    b.ops.length = 0;
    expect(await b.trade(acct, 'slow')).toEqual({ status: 200, json: '{"ticket":99}', replay: true });
    expect(await b.trade(acct, 'slow')).toEqual({ status: 200, json: '{"ticket":99}', replay: true });
    expect(b.ops).toEqual(['account.lookupTrade']);
    expect(await code(a.trade(acct, 'after'))).toBe('SERVICE_UNAVAILABLE'); // a's old lease: fenced, nothing sent
    expect(a.sent.map((t) => t.clientOrderId)).toEqual(['slow']);
    expect(b.sent).toEqual([]);
  });

  it('PostgreSQL unreachable: the claim fails, the order is not sent, and the answer is a 503 with retry-after (not a 500)', async () => {
    const u = new URL(server.engine.url);
    u.port = String(await freePort()); // nothing listens there
    const gone = openPgPool(u.toString(), { connectTimeoutMs: 500 });
    const sent: string[] = [];
    const fenced = new FencedShards({
      nodeId: 'a', ledger: new IdempotencyLedger(gone), clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent'),
      keeper: { leaseOf: (accountId): Lease => ({ accountId, epoch: 1 }) },
      shards: { call: async (_k, _op, args) => { sent.push((args as Trade).clientOrderId!); return { status: 200, json: '{}', replay: false } as never; } },
    });
    try {
      const err = await fenced.call('acct-x', 'account.trade', { accountId: 'acct-x', op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume: 0.01 }, clientOrderId: 'p1' })
        .then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
      expect(sent).toEqual([]);
    } finally {
      await gone.end();
    }
  });
});

describe('every broker-touching command on the owner', () => {
  /** Shards that record every call that reached them; a session order answers a ticket. */
  function recording() {
    const calls: Array<{ op: CommandName; args: Record<string, unknown> }> = [];
    const shards: LocalShards = {
      call: async (_key, op, args) => {
        calls.push({ op, args: args as Record<string, unknown> });
        return (op === 'session.op' ? { ticket: 1000 + calls.length } : { passed: op }) as never;
      },
    };
    return { calls, shards };
  }
  const order = (accountId: string, clientOrderId?: string, volume = 0.01): ArgsOf<'session.op'> => ({
    accountId, handleHash: 'h1', op: 'OrderSend', args: { symbol: 'BTCUSD', operation: 'Buy', volume }, ...(clientOrderId === undefined ? {} : { clientOrderId }),
  });

  it('a gateway session order (session.op) is claimed in PostgreSQL; its retry replays without reaching the broker; a read is not claimed', async () => {
    const a = node('a');
    const acct = await ownedBy(a);
    const { calls, shards } = recording();
    const fenced = new FencedShards({ nodeId: 'a', shards, ledger: new IdempotencyLedger(server.pool), clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent'), keeper: { leaseOf: (id) => a.leases.get(id) } });
    const first = await fenced.call(acct, 'session.op', order(acct, 'g1'));
    expect(first).toEqual({ ticket: 1001 });
    const ledger = new IdempotencyLedger(server.pool);
    expect(await ledger.get(acct, 'g1')).toMatchObject({ state: 'result', status: 200, epoch: a.leases.get(acct)!.epoch });
    expect(await fenced.call(acct, 'session.op', order(acct, 'g1'))).toEqual(first); // replayed
    expect(await code(fenced.call(acct, 'session.op', order(acct, 'g1', 0.02)))).toBe('IDEMPOTENCY_KEY_REUSED');
    expect(calls).toHaveLength(1);
    // No id (the gateway routes take none): one is made, so the order is claimed and fenced too.
    await fenced.call(acct, 'session.op', order(acct));
    const made = calls[1]!.args.clientOrderId as string;
    expect(made).toMatch(/^c-[0-9a-f-]{36}$/);
    expect((await ledger.get(acct, made))?.state).toBe('result');
    // A read goes through once the lease is checked, with no record.
    await fenced.call(acct, 'session.op', { accountId: acct, handleHash: 'h1', op: 'GetQuote', args: { symbol: 'BTCUSD' } });
    expect(calls.map((c) => c.op)).toEqual(['session.op', 'session.op', 'session.op']);
    expect(calls[2]!.args.clientOrderId).toBeUndefined();
    const rows = await server.pool.query('SELECT count(*)::int AS n FROM idempotency WHERE account_id = $1', [acct]);
    expect(rows.rows[0].n).toBe(2);
  });

  it('a session order still out: a retry with its id waits for it and gets the same answer, sent once', async () => {
    const a = node('a');
    const acct = await ownedBy(a);
    let release!: () => void;
    const sent: unknown[] = [];
    const shards: LocalShards = {
      call: async (_k, _op, args) => {
        sent.push(args);
        await new Promise<void>((r) => { release = r; });
        return { ticket: 7 } as never;
      },
    };
    const fenced = new FencedShards({ nodeId: 'a', shards, ledger: new IdempotencyLedger(server.pool), clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent'), keeper: { leaseOf: (id) => a.leases.get(id) } });
    const first = fenced.call(acct, 'session.op', order(acct, 'w1'));
    await expect.poll(() => sent.length).toBe(1);
    const retry = fenced.call(acct, 'session.op', order(acct, 'w1'));
    release();
    expect(await Promise.all([first, retry])).toEqual([{ ticket: 7 }, { ticket: 7 }]);
    expect(sent).toHaveLength(1);
  });

  it('a stale owner (its lease lapsed by its own clock) refuses every broker-touching command with 503 and makes no call; local ones still run', async () => {
    const clock = { t: 10_000, now() { return this.t; } };
    const accountId = `acct-${++accounts}`;
    const keeper = new LeaseKeeper({ db: server.pool, nodeId: 'stale', leaseMs: 1_500, clock, accounts: () => [accountId] });
    await keeper.tick();
    const { calls, shards } = recording();
    const fenced = new FencedShards({ nodeId: 'stale', shards, keeper, ledger: new IdempotencyLedger(server.pool), clock: { now: () => 1_700_000_000_000 }, log: createLogger('silent') });
    // One argument record that every command accepts the shape of (a session order for session.op).
    const argsFor = (op: CommandName) => ({ ...order(accountId, `s-${op}`), symbol: 'BTCUSD', timeframes: [], timeoutMs: 10, accountIds: [accountId], seatId: 's', readyAt: 0, fault: {} }) as never;
    const ops = Object.keys(COMMAND_REACH) as CommandName[];
    const touching = ops.filter((op) => reachOf(op, argsFor(op)) !== 'local');
    expect(touching).toEqual(expect.arrayContaining(['account.trade', 'session.op', 'account.op', 'stream.sub', 'session.connect']));

    // While held: they all run (the trades claimed).
    for (const op of touching) await fenced.call(accountId, op, argsFor(op));
    expect(calls.map((c) => c.op)).toEqual(touching);

    // Paused past the lease (SIGSTOP, then SIGCONT): by its own clock the lease has lapsed.
    clock.t += 1_600;
    calls.length = 0;
    for (const op of touching) {
      const err = await fenced.call(accountId, op, argsFor(op)).then(() => undefined, (e: unknown) => e);
      expect(err, op).toMatchObject({ code: 'SERVICE_UNAVAILABLE', status: 503, headers: { 'retry-after': '1' } });
    }
    expect(calls).toEqual([]);
    for (const op of ops.filter((o) => !touching.includes(o))) await fenced.call(accountId, op, argsFor(op));
    expect(calls.every((c) => reachOf(c.op, c.args as never) === 'local')).toBe(true);
    await keeper.stop({ handover: false });
  });
});

