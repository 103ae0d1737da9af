// Trading with idempotency (SPEC §3 Idempotency record, §7 409/422, §8), inside the account's
// shard. All requests of an account run on this one thread, so "look up the record, else claim
// the id" happens with no await in between and needs no lock: two concurrent requests with the
// same id find each other here, and the second one waits for the first one's result.
import { createHash } from 'node:crypto';
import { createActor, type Actor } from 'xstate';
import {
  idempotencyMachine, NotSentError, type IdempotencyContext, type IdempotencyEvent, type StoredResult,
} from '../../../actors/idempotency.js';
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
type IdemSnapshot = ReturnType<IdemActor['getSnapshot']>;

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

/** A record's actor, and while its one broker call is in flight, what its requests wait on. */
interface Rec {
  actor: IdemActor;
  /** Settles when the host has told the actor the call's outcome (or the host stopped). */
  inflight?: Promise<void>;
  settle?: () => void;
  abort?: (err: Error) => void;
}

const stoppedError = () => new Error('idempotency record stopped before it settled');

export class TradeDesk {
  private readonly records = new Map<string, Rec>();
  // Provided once: machine.provide() costs hundreds of µs, far too much per order.
  private readonly machine;
  // One observer for every record: an action that throws (a failed SQLite write) puts the actor in
  // error; without an error observer xstate would rethrow it from a timer and kill the shard.
  private readonly observer;

  constructor(private readonly store: IdempotencyStore, private readonly log: Logger) {
    this.observer = { error: (err: unknown) => this.log.error('idempotency actor failed', { err }) };
    this.machine = idempotencyMachine.provide({
      actions: {
        persistSent: (_a, c: IdempotencyContext) => {
          // Durable before `send` returns; the host calls the broker only after that.
          if (!this.store.insertSent(c.accountId, c.clientOrderId, c.paramsHash, Date.now(), c.expiresAt)) {
            throw new Error(`idempotency record ${c.clientOrderId} already exists`);
          }
        },
        persistResult: (_a, c: IdempotencyContext) => this.store.setResult(c.accountId, c.clientOrderId, c.result!.status, JSON.stringify(c.result!.body)),
        persistUncertain: (_a, c: IdempotencyContext) => this.store.setUncertain(c.accountId, c.clientOrderId),
        forget: ({ self }, c: IdempotencyContext) => {
          this.store.remove(c.accountId, c.clientOrderId);
          const k = this.key(c.accountId, c.clientOrderId);
          if ((this.records.get(k)?.actor as unknown) === self) this.records.delete(k);
        },
      },
    });
  }

  private key(accountId: string, id: string) {
    return `${accountId}\u0000${id}`;
  }

  count(): number {
    return this.records.size;
  }

  private start(row: Pick<IdemRow, 'account_id' | 'client_order_id' | 'params_hash' | 'expires_at'> & { phase: 'new' | IdemRow['phase']; result?: StoredResult }): Rec {
    const actor = createActor(this.machine, {
      input: {
        accountId: row.account_id, clientOrderId: row.client_order_id, paramsHash: row.params_hash, phase: row.phase,
        expiresAt: row.expires_at, ...(row.result ? { result: row.result } : {}),
      },
    });
    actor.subscribe(this.observer);
    const rec: Rec = { actor };
    this.records.set(this.key(row.account_id, row.client_order_id), rec);
    actor.start();
    return rec;
  }

  /** Restores the records of the accounts this shard owns; 'sent' without a result becomes 'uncertain'. */
  rehydrate(owns: (accountId: string) => boolean, now: number): number {
    this.store.purgeExpired(now);
    let n = 0;
    for (const row of this.store.live(now)) {
      if (!owns(row.account_id) || this.records.has(this.key(row.account_id, row.client_order_id))) continue;
      const result = row.phase === 'result' && row.status !== null ? { status: row.status, body: JSON.parse(row.result_json ?? 'null') as unknown } : undefined;
      this.start({ ...row, ...(result ? { result } : {}) });
      n++;
    }
    return n;
  }

  /** The record's state once no broker call of it is in flight any more. */
  private async settled(rec: Rec): Promise<IdemSnapshot> {
    if (rec.inflight) await rec.inflight;
    const s = rec.actor.getSnapshot();
    if (s.status === 'error') throw s.error;
    if (s.status === 'stopped') throw stoppedError();
    return s;
  }

  /** Answers from an existing record, waiting for it if its send is still in flight. */
  private async existing(rec: Rec, hash: string): Promise<TradeReply | undefined> {
    if (rec.actor.getSnapshot().context.paramsHash !== hash) {
      throw apiError('IDEMPOTENCY_KEY_REUSED', 'this clientOrderId was already used with different order parameters; nothing was sent');
    }
    const s = await this.settled(rec);
    if (s.matches('result')) return { ...s.context.result!, replay: true };
    if (s.matches('uncertain')) {
      throw apiError('IDEMPOTENCY_UNCERTAIN', 'an earlier request with this clientOrderId timed out after it was sent: check /OpenedOrders for your magic number, then use a new id');
    }
    return undefined; // discarded (never sent) or expired: the id is free again
  }

  /** Tells the record its broker call's outcome, then wakes its waiters. */
  private finish(rec: Rec, ev: IdempotencyEvent, err?: unknown): void {
    if (rec.settle === undefined) return; // the host stopped meanwhile: the waiters were failed already
    if (err !== undefined && ev.type === 'lost') this.log.warn('order outcome unknown after send', { err });
    const settle = rec.settle;
    rec.inflight = rec.settle = rec.abort = undefined;
    try {
      rec.actor.send(ev);
    } finally {
      settle();
    }
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
      const found = this.records.get(k);
      if (found) {
        const r = await this.existing(found, hash);
        if (r) return r;
        if (this.records.get(k) === found) this.records.delete(k);
        continue;
      }
      const lease = await entry.acquire();
      // The await above let other requests run: one may have claimed the id meanwhile.
      if (this.records.has(k)) {
        lease.release();
        continue;
      }
      const expiresAt = Date.now() + IDEMPOTENCY_TTL_MS;
      const rec = this.start({ account_id: entry.accountId, client_order_id: clientOrderId, params_hash: hash, phase: 'new', expires_at: expiresAt });
      // `send` runs persistSent synchronously: once it returns with the record in `sent`, the
      // record is committed and the order may go to the broker.
      rec.actor.send({ type: 'send' });
      const claimed = rec.actor.getSnapshot();
      if (claimed.status !== 'active' || !claimed.matches('sent')) {
        lease.release();
        if (this.records.get(k) === rec) this.records.delete(k);
        throw claimed.status === 'error' ? claimed.error : stoppedError();
      }
      rec.inflight = new Promise<void>((resolve, reject) => {
        rec.settle = resolve;
        rec.abort = reject;
      });
      execute(prep, lease, brokerRequestId(entry.accountId, clientOrderId, expiresAt)).then(
        (result) => this.finish(rec, { type: 'done', result }),
        (err: unknown) => this.finish(rec, err instanceof NotSentError ? { type: 'failed' } : { type: 'lost' }, err),
      );
      const s = await this.settled(rec);
      if (s.matches('result')) return { ...s.context.result!, replay: false };
      if (s.matches('uncertain')) {
        throw apiError('TERMINAL_ERROR', 'the order was sent but its outcome is unknown (reply lost): check /OpenedOrders; retrying this clientOrderId answers 409');
      }
      throw apiError('NOT_CONNECTED', 'the order was not sent: the account connection dropped; retry');
    }
  }

  stop(): void {
    for (const rec of this.records.values()) {
      rec.actor.stop();
      const abort = rec.abort;
      rec.inflight = rec.settle = rec.abort = undefined;
      abort?.(stoppedError());
    }
    this.records.clear();
  }
}
