// Trading with idempotency (SPEC §3 Idempotency record, §7 409/422, §8), inside the account's
// shard. All requests of an account run on this one thread, so "look up the record, else claim
// the id" happens with no await in between and needs no lock: two concurrent requests with the
// same id find each other here, and the second one waits for the first one's result.
import { createHash } from 'node:crypto';
import { createActor, fromPromise, type Actor } from 'xstate';
import { idempotencyMachine, NotSentError, type IdempotencyContext, type StoredResult } from '../../../actors/idempotency.js';
import { dialectOf } from '../../broker/dialect.js';
import {
  BrokerDisconnectedError, BrokerTimeoutError, isMarketType, isStopLimitType, parseOrderType,
  type BrokerConnection, type TradeOptions, type TradeResult,
} from '../../broker/types.js';
import { apiError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { IdempotencyStore, IdemRow } from '../../store/idempotency.js';
import type { TradeOp, TradeReply } from './accountCommands.js';
import type { AccountEntry, Lease } from './accountEntry.js';
import { assertAvailable, brokerFault, utc } from './accountOps.js';

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
export const CLIENT_ORDER_ID = /^[A-Za-z0-9_.:-]{1,64}$/;

type IdemActor = Actor<typeof idempotencyMachine>;

/** A broker call ready to run, and the canonical form of its parameters (what the hash covers). */
interface Prepared {
  canonical: unknown;
  run(conn: BrokerConnection, opts: TradeOptions): Promise<TradeResult>;
}

const num = (v: unknown) => (v === undefined ? undefined : Number(v));
function def<T extends object>(o: T): T {
  for (const k of Object.keys(o) as (keyof T)[]) if (o[k] === undefined) delete o[k];
  return o;
}
const ticketOf = (a: Record<string, unknown>) => {
  const t = Number(a.ticket);
  if (!Number.isInteger(t) || t <= 0) throw apiError('BAD_REQUEST', "parameter 'ticket' must be a positive integer");
  return t;
};

/** Parses a trade request. Platform rules are checked here, before anything is recorded or sent. */
export function prepare(op: TradeOp, a: Record<string, unknown>, entry: { platform: AccountEntry['platform']; build: number }): Prepared {
  assertAvailable(op, entry.platform, entry.build);
  switch (op) {
    case 'OrderSend': {
      const opRaw = a.operation as string | undefined;
      if (opRaw === undefined) throw apiError('BAD_REQUEST', "parameter 'operation' is required (Buy, Sell, BuyLimit, ... or the numeric code)");
      const type = parseOrderType(opRaw);
      if (!type) throw apiError('BAD_REQUEST', `parameter 'operation': unknown order type ${opRaw}`);
      if (isStopLimitType(type) && !dialectOf(entry.platform).stopLimitOrders) {
        throw apiError('BAD_REQUEST', `${type} orders do not exist on ${entry.platform} (no stop-limit orders)`);
      }
      if (!a.symbol) throw apiError('BAD_REQUEST', "parameter 'symbol' is required");
      const volume = num(a.volume ?? a.lots);
      if (volume === undefined || !(volume > 0)) throw apiError('BAD_REQUEST', "parameter 'volume' must be a positive number");
      if (!isMarketType(type) && a.price === undefined) throw apiError('BAD_REQUEST', `parameter 'price' is required for ${type} orders`);
      const req = def({
        symbol: String(a.symbol), type, volume, price: num(a.price), slippage: num(a.slippage), stoploss: num(a.stoploss),
        takeprofit: num(a.takeprofit), comment: a.comment as string | undefined, magic: num(a.magic), expiration: num(a.expiration),
        stopLimitPrice: num(a.stopLimitPrice),
      });
      return { canonical: req, run: (c, o) => c.orderSend(req, o) };
    }
    case 'OrderModify': {
      const req = def({
        ticket: ticketOf(a), stoploss: num(a.stoploss), takeprofit: num(a.takeprofit), price: num(a.price),
        expiration: num(a.expiration), stopLimitPrice: num(a.stopLimitPrice),
      });
      return { canonical: req, run: (c, o) => c.orderModify(req, o) };
    }
    case 'OrderClose': {
      const req = def({ ticket: ticketOf(a), lots: num(a.lots ?? a.volume), price: num(a.price), slippage: num(a.slippage), comment: a.comment as string | undefined });
      return { canonical: req, run: (c, o) => c.orderClose(req, o) };
    }
    case 'OrderDelete': {
      const req = { ticket: ticketOf(a) };
      return { canonical: req, run: (c, o) => c.orderDelete(req, o) };
    }
    case 'OrderCloseBy': {
      const by = Number(a.byTicket);
      if (!Number.isInteger(by) || by <= 0) throw apiError('BAD_REQUEST', "parameter 'byTicket' must be a positive integer");
      const req = def({ ticket: ticketOf(a), byTicket: by, comment: a.comment as string | undefined });
      return { canonical: req, run: (c, o) => c.orderCloseBy(req, o) };
    }
  }
}

export function paramsHash(op: TradeOp, canonical: unknown): string {
  const o = canonical as Record<string, unknown>;
  const sorted = Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  return createHash('sha256').update(JSON.stringify([op, sorted])).digest('base64url');
}

/** The answer to a trade: fills and broker rejections are both final (and replayed). */
export function answer(r: TradeResult): StoredResult {
  if (r.ok) return { status: 200, body: utc({ ...r.order, retcode: r.retcode, deals: r.deals }) };
  return { status: 400, body: { error: 'TRADE_REQUEST_ERROR', message: r.message, reason: r.reason, retcode: r.retcode } };
}

/**
 * The request id the broker dedups on. It is unique per idempotency record, not just the
 * clientOrderId: the broker keeps ids per broker login, and one login may be bound to several
 * accounts, or reuse a clientOrderId after its record expired; either must be a new order.
 */
export function brokerRequestId(accountId: string, clientOrderId: string, expiresAt: number): string {
  return `${accountId}/${clientOrderId}/${expiresAt.toString(36)}`;
}

/**
 * Sends once and settles the outcome. A reply lost after the send is checked with lookupRequest
 * (by the record's broker request id); if the broker cannot say, the outcome is uncertain.
 */
async function execute(prep: Prepared, lease: Lease, requestId: string): Promise<StoredResult> {
  try {
    return answer(await prep.run(lease.conn, { requestId }));
  } catch (err) {
    if (err instanceof BrokerDisconnectedError || (err instanceof BrokerTimeoutError && !err.sent)) throw new NotSentError(err.message);
    if (err instanceof BrokerTimeoutError) {
      const found = await lease.conn.lookupRequest(requestId).catch(() => null);
      if (found) return answer(found.result);
    }
    throw err;
  } finally {
    lease.release();
  }
}

type IdemSnapshot = ReturnType<IdemActor['getSnapshot']>;
const settledState = (x: IdemSnapshot) => x.status === 'done' || (x.status === 'active' && !x.matches('sent') && !x.matches('new'));

/** Like xstate's waitFor, but a plain subscription (cheaper on this hot path); rejects if the actor stops first. */
function settled(actor: IdemActor): Promise<IdemSnapshot> {
  const now = actor.getSnapshot();
  if (settledState(now)) return Promise.resolve(now);
  if (now.status !== 'active') return Promise.reject(new Error('idempotency record stopped before it settled'));
  return new Promise((resolve, reject) => {
    const sub = actor.subscribe({
      next: (x) => {
        if (settledState(x)) {
          sub.unsubscribe();
          resolve(x);
        }
      },
      error: (e) => reject(e),
      complete: () => {
        const x = actor.getSnapshot();
        if (settledState(x)) resolve(x);
        else reject(new Error('idempotency record stopped before it settled'));
      },
    });
  });
}

export class TradeDesk {
  private readonly actors = new Map<string, IdemActor>();
  /** The broker call of each record in flight, handed to its `execute` actor. */
  private readonly executors = new Map<string, () => Promise<StoredResult>>();
  // Provided once: machine.provide() costs hundreds of µs, far too much per order.
  private readonly machine;

  constructor(private readonly store: IdempotencyStore, private readonly log: Logger) {
    const key = (c: { accountId: string; clientOrderId: string }) => this.key(c.accountId, c.clientOrderId);
    this.machine = idempotencyMachine.provide({
      actors: {
        execute: fromPromise(({ input }) => {
          const f = this.executors.get(key(input));
          this.executors.delete(key(input));
          return f ? f() : Promise.reject(new Error('no executor for this record'));
        }),
      },
      actions: {
        persistSent: (_a, c: IdempotencyContext) => {
          // Durable before the invoked execute actor starts (entry actions run first).
          if (!this.store.insertSent(c.accountId, c.clientOrderId, c.paramsHash, Date.now(), c.expiresAt)) {
            throw new Error(`idempotency record ${c.clientOrderId} already exists`);
          }
        },
        persistResult: (_a, c: IdempotencyContext) => this.store.setResult(c.accountId, c.clientOrderId, c.result!.status, JSON.stringify(c.result!.body)),
        persistUncertain: (_a, c: IdempotencyContext) => this.store.setUncertain(c.accountId, c.clientOrderId),
        forget: ({ self }, c: IdempotencyContext) => {
          this.store.remove(c.accountId, c.clientOrderId);
          const k = key(c);
          if ((this.actors.get(k) as unknown) === self) this.actors.delete(k);
        },
      },
    });
  }

  private key(accountId: string, id: string) {
    return `${accountId}\u0000${id}`;
  }

  count(): number {
    return this.actors.size;
  }

  private start(row: Pick<IdemRow, 'account_id' | 'client_order_id' | 'params_hash' | 'expires_at'> & { phase: 'new' | IdemRow['phase']; result?: StoredResult }, exec?: () => Promise<StoredResult>): IdemActor {
    const k = this.key(row.account_id, row.client_order_id);
    if (exec) this.executors.set(k, exec);
    const actor = createActor(this.machine, {
      input: {
        accountId: row.account_id, clientOrderId: row.client_order_id, paramsHash: row.params_hash, phase: row.phase,
        expiresAt: row.expires_at, ...(row.result ? { result: row.result } : {}),
      },
    });
    actor.subscribe({ error: (err) => this.log.error('idempotency actor failed', { accountId: row.account_id, err }) });
    this.actors.set(k, actor);
    actor.start();
    return actor;
  }

  /** Restores the records of the accounts this shard owns; 'sent' without a result becomes 'uncertain'. */
  rehydrate(owns: (accountId: string) => boolean, now: number): number {
    this.store.purgeExpired(now);
    let n = 0;
    for (const row of this.store.live(now)) {
      if (!owns(row.account_id) || this.actors.has(this.key(row.account_id, row.client_order_id))) continue;
      const result = row.phase === 'result' && row.status !== null ? { status: row.status, body: JSON.parse(row.result_json ?? 'null') as unknown } : undefined;
      this.start({ ...row, ...(result ? { result } : {}) });
      n++;
    }
    return n;
  }

  /** Answers from an existing record, waiting for it if its send is still in flight. */
  private async existing(actor: IdemActor, hash: string): Promise<TradeReply | undefined> {
    if (actor.getSnapshot().context.paramsHash !== hash) {
      throw apiError('IDEMPOTENCY_KEY_REUSED', 'this clientOrderId was already used with different order parameters; nothing was sent');
    }
    const s = await settled(actor);
    if (s.matches('result')) return { ...s.context.result!, replay: true };
    if (s.matches('uncertain')) {
      throw apiError('IDEMPOTENCY_UNCERTAIN', 'an earlier request with this clientOrderId timed out after it was sent: check /OpenedOrders for your magic number, then use a new id');
    }
    return undefined; // discarded (never sent) or expired: the id is free again
  }

  async trade(entry: AccountEntry, op: TradeOp, args: Record<string, unknown>, clientOrderId: string | undefined): Promise<TradeReply> {
    const prep = prepare(op, args, entry);
    if (clientOrderId === undefined) {
      const lease = await entry.acquire();
      try {
        return { ...answer(await prep.run(lease.conn, {})), replay: false };
      } catch (err) {
        throw brokerFault(err);
      } finally {
        lease.release();
      }
    }
    if (!CLIENT_ORDER_ID.test(clientOrderId)) {
      throw apiError('BAD_REQUEST', 'clientOrderId / Idempotency-Key must be 1 to 64 characters from A-Z a-z 0-9 _ . : -');
    }
    const hash = paramsHash(op, prep.canonical);
    const k = this.key(entry.accountId, clientOrderId);
    for (;;) {
      const found = this.actors.get(k);
      if (found) {
        const r = await this.existing(found, hash);
        if (r) return r;
        if (this.actors.get(k) === found) this.actors.delete(k);
        continue;
      }
      const lease = await entry.acquire();
      // The await above let other requests run: one may have claimed the id meanwhile.
      if (this.actors.has(k)) {
        lease.release();
        continue;
      }
      const expiresAt = Date.now() + IDEMPOTENCY_TTL_MS;
      const actor = this.start(
        { account_id: entry.accountId, client_order_id: clientOrderId, params_hash: hash, phase: 'new', expires_at: expiresAt },
        () => execute(prep, lease, brokerRequestId(entry.accountId, clientOrderId, expiresAt)),
      );
      let s;
      try {
        actor.send({ type: 'send' });
        s = await settled(actor);
      } finally {
        lease.release(); // idempotent; execute releases it too, this covers a failure before it ran
      }
      if (s.matches('result')) return { ...s.context.result!, replay: false };
      if (s.matches('uncertain')) {
        throw apiError('TERMINAL_ERROR', 'the order was sent but its outcome is unknown (reply lost): check /OpenedOrders; retrying this clientOrderId answers 409');
      }
      throw apiError('NOT_CONNECTED', 'the order was not sent: the account connection dropped; retry');
    }
  }

  stop(): void {
    for (const a of this.actors.values()) a.stop();
    this.actors.clear();
  }
}
