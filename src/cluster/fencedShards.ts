// The owner's side of a call, in cluster mode: what the router hands its local calls to (LocalShards).
// Every command that can reach the account's broker (commandReach.ts) runs only while this node holds
// the account's lease (by its own clock, with room for the dispatch); a trade of either family
// (`account.trade`, a trading `session.op`) also only after a fenced claim in PostgreSQL, so the
// idempotency contract holds across nodes: a retry on any node replays, waits or answers 409, and
// an owner that lost the account (paused past its lease, cut off) cannot act. Every trade gets a
// claim (a generated id when the caller gave none), so fencing covers every order.
import { hash as digest, randomUUID } from 'node:crypto';
import { ApiError, apiError } from '../errors.js';
import type { Logger } from '../log.js';
import { quickOrderSend, TRADE_SCHEMAS } from '../market/orderSchemas.js';
import type { TradeReply } from '../runtime/hosts/accountCommands.js';
import { IDEMPOTENCY_TTL_MS, paramsHash } from '../runtime/hosts/accountTrade.js';
import { stoppedError } from '../runtime/hosts/recordClaim.js';
import { assertClientOrderId } from '../runtime/hosts/tradeRequest.js';
import { isStillConnecting } from '../runtime/hosts/connectionWaiters.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import { reachOf } from './commandReach.js';
import type { IdempotencyLedger } from './idempotencyLedger.js';
import type { Lease } from './leases.js';
import { NotHeldError } from './moves.js';
import type { LocalShards } from './router.js';

export interface FencedShardsOptions {
  nodeId: string;
  shards: LocalShards;
  keeper: { leaseOf(accountId: string, forMs?: number): Lease | undefined };
  ledger: IdempotencyLedger;
  /** Idempotency record times (the gateway's clock, as on one node). */
  clock: Clock;
  /** The lease must still hold this long when a command is handed to the shard, which makes the
   *  broker call at once (default 250 ms). Kept well under a renewal period: with a short lease (1.5 s,
   *  renewed every 0.5 s) a margin of a second refused trades between renewals while the node held it. */
  dispatchMarginMs?: number;
  /** Asked when PostgreSQL fenced a claim or a change: whether a newer process took this node's
   *  NODE_ID over (if so the caller stops this process at once, not at its next lease round). */
  replaced?: () => Promise<boolean>;
  log: Logger;
}

type TradeArgs = ArgsOf<'account.trade'>;
type SessionOpArgs = ArgsOf<'session.op'>;

// Refusals a shard makes before anything is sent (the account's first login still under way
// included): the claim is freed so a corrected retry can go.
const NOT_SENT = new Set(['NOT_CONNECTED', 'STORAGE_UNAVAILABLE', 'NOT_ON_THIS_TERMINAL']);
function certainlyNotSent(err: unknown): boolean {
  return err instanceof ApiError && (NOT_SENT.has(err.code) || isStillConnecting(err) || (err.status >= 400 && err.status < 500 && err.code !== 'IDEMPOTENCY_UNCERTAIN'));
}

/** The claim could not be written (PostgreSQL unreachable or too slow): nothing was sent. */
const noLedger = () => apiError('SERVICE_UNAVAILABLE', 'the cluster database cannot be reached, so the order was not sent; retry', { headers: { 'retry-after': '1' } });
/** Refused before anything ran: the router sends the call on to the next owner (moves.ts). */
const notOwner = (accountId: string) => new NotHeldError(accountId);
const uncertain = (id: string) => apiError('IDEMPOTENCY_UNCERTAIN', `the order with clientOrderId ${id} may have been executed (its node stopped before the broker answered); it is not sent again`);

/** A gateway session's order: its parameters arrive validated by the route (proxySchemas.ts), so
 *  they are hashed as they are, under the operation's name in its own namespace. */
function sessionParamsHash(op: string, args: Record<string, unknown>): string {
  const sorted = Object.fromEntries(Object.keys(args).sort().map((k) => [k, args[k]]));
  return digest('sha256', JSON.stringify([`session:${op}`, sorted]), 'base64url');
}

/** How one family's order goes through the claim: the id, the hash, the send, and its record. */
interface Order<R> {
  clientOrderId: string;
  /** The id is the client's own (not one made here): a retry with it is answered wherever it lands. */
  ownId: boolean;
  paramsHash: string;
  /** To the shard, which keeps no record of its own: `expiresAt` is the claim's, for its broker request id. */
  send(clientOrderId: string, expiresAt: number): Promise<R>;
  /** The answer as recorded (replayed to retries). */
  record(r: R): { status: number; json: string };
  replay(status: number, json: string): R;
  /** What the broker did with the order of a record an earlier owner left unsettled (expiring at
   *  `expiresAt`): its answer, or null if the broker does not know it. Absent: not asked (409). */
  lookup?(clientOrderId: string, expiresAt: number): Promise<R | null>;
}

/** Answers whose outcome could not be written (PostgreSQL away), kept for retries in the same lease. */
const UNRECORDED_MAX = 1_000;

export class FencedShards implements LocalShards {
  /**
   * Orders of this node under way, by account and id, from before their claim until their outcome
   * is recorded. A retry with the same id meanwhile (from any node: they forward it here) waits for
   * it, then claims, and so meets its record: replay, 409 or 422. The shard keeps no record of its
   * own in cluster mode, so nothing but this may stand between a retry and a second send.
   */
  private readonly underWay = new Map<string, Promise<unknown>>();
  /** Sent and answered, the outcome not written: the record stays `sent` at this epoch. */
  private readonly unrecorded = new Map<string, { status: number; json: string }>();

  constructor(private readonly o: FencedShardsOptions) {}

  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> {
    const reach = reachOf(op, args);
    if (reach === 'local') return this.o.shards.call(key, op, args, opts);
    const lease = this.o.keeper.leaseOf(key, this.o.dispatchMarginMs ?? 250);
    if (!lease) return Promise.reject(notOwner(key));
    if (reach === 'broker') return this.o.shards.call(key, op, args, opts);
    if (reach === 'change') return this.changed(key, lease, () => this.o.shards.call(key, op, args, opts));
    if (op === 'session.op') return this.sessionTrade(key, lease, args as SessionOpArgs, opts) as Promise<ResultOf<C>>;
    return this.trade(key, lease, args as TradeArgs, opts) as Promise<ResultOf<C>>;
  }

  /** A change of the account's state: only while PostgreSQL says the lease is this node's at its
   *  epoch (a trade's claim makes the same check), so nothing of it runs on an owner whose lease
   *  moved on there while its own clock still believed it. */
  private async changed<R>(key: string, lease: Lease, run: () => Promise<R>): Promise<R> {
    const held = await this.o.ledger.holds(this.o.nodeId, lease).catch((err: unknown) => {
      this.o.log.warn('lease check failed: account change not made', { accountId: key, err: errorMessage(err) });
      throw apiError('SERVICE_UNAVAILABLE', 'the cluster database cannot be reached, so the change was not made; retry', { headers: { 'retry-after': '1' } });
    });
    if (!held) throw this.fenced(key);
    return run();
  }

  /** This node no longer acts on the account under `lease`: lost, being handed over, or held again
   *  at another epoch. */
  private moved(key: string, lease: Lease): boolean {
    return this.o.keeper.leaseOf(key)?.epoch !== lease.epoch;
  }

  /** PostgreSQL said the lease is not this node's at its epoch: NotHeldError, answered "not held here"
   *  (a forwarded call reached this process alone: callServer.ts's queue group). A newer process of
   *  this NODE_ID may hold it: `replaced` stops this one then. */
  private fenced(key: string): NotHeldError {
    void this.o.replaced?.().catch(() => false);
    return notOwner(key);
  }

  private trade(key: string, lease: Lease, a: TradeArgs, opts?: CallOptions): Promise<TradeReply> {
    // The shard's own reading (prepare): the quick one for a plain OrderSend, the same canonical form.
    const quick = a.op === 'OrderSend' && a.args !== null && typeof a.args === 'object' ? quickOrderSend(a.args) : undefined;
    const parsed = quick !== undefined ? { success: true as const, data: quick } : TRADE_SCHEMAS[a.op]?.safeParse(a.args);
    // Unreadable: the shard answers 400 with the parameters named, and sends nothing.
    if (!parsed?.success) return this.o.shards.call(key, 'account.trade', a, opts);
    if (a.clientOrderId !== undefined) {
      try {
        assertClientOrderId(a.clientOrderId);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return this.claimed(key, lease, {
      clientOrderId: a.clientOrderId ?? `c-${randomUUID()}`, ownId: a.clientOrderId !== undefined, paramsHash: paramsHash(a.op, parsed.data),
      send: (clientOrderId, ledgerExpiresAt) => this.o.shards.call(key, 'account.trade', { ...a, clientOrderId, ledgerExpiresAt }, opts),
      record: (r) => ({ status: r.status, json: r.json }),
      replay: (status, json) => ({ status, json, replay: true }),
      lookup: (clientOrderId, ledgerExpiresAt) => this.o.shards.call(key, 'account.lookupTrade', { accountId: a.accountId, clientOrderId, ledgerExpiresAt }, opts),
    });
  }

  private sessionTrade(key: string, lease: Lease, a: SessionOpArgs, opts?: CallOptions): Promise<unknown> {
    return this.claimed<unknown>(key, lease, {
      clientOrderId: a.clientOrderId ?? `c-${randomUUID()}`, ownId: a.clientOrderId !== undefined, paramsHash: sessionParamsHash(a.op, a.args),
      send: (clientOrderId) => this.o.shards.call(key, 'session.op', { ...a, clientOrderId }, opts),
      record: (r) => ({ status: 200, json: JSON.stringify(r ?? null) }),
      replay: (_status, json) => JSON.parse(json) as unknown,
    });
  }

  /** One order at a time per (account, id) on this node: a later one waits for the one under way. */
  private async claimed<R>(key: string, lease: Lease, order: Order<R>): Promise<R> {
    const slot = `${key}\u0000${order.clientOrderId}`;
    for (let out = this.underWay.get(slot); out; out = this.underWay.get(slot)) await out.catch(() => undefined);
    const mine = this.claimAndSend(key, slot, lease, order);
    this.underWay.set(slot, mine);
    try {
      return await mine;
    } finally {
      if (this.underWay.get(slot) === mine) this.underWay.delete(slot);
    }
  }

  private async claimAndSend<R>(key: string, slot: string, lease: Lease, order: Order<R>): Promise<R> {
    const { clientOrderId } = order;
    const now = this.o.clock.now();
    const expiresAt = now + IDEMPOTENCY_TTL_MS;
    const claim = await this.o.ledger.claim({
      owner: this.o.nodeId, lease, clientOrderId, paramsHash: order.paramsHash, now, expiresAt,
    }).catch((err: unknown) => {
      // A driver error (refused, reset, timed out) is a 503 like any unreachable engine, not a 500.
      this.o.log.warn('idempotency claim failed: order not sent', { accountId: key, err: errorMessage(err) });
      throw noLedger();
    });
    switch (claim.kind) {
      case 'fenced': throw this.fenced(key);
      case 'replay': return order.replay(claim.status, claim.resultJson);
      case 'mismatch': throw apiError('IDEMPOTENCY_KEY_REUSED', `clientOrderId ${clientOrderId} was used with other parameters`);
      case 'uncertain': return this.lookedUp(key, lease, order);
      case 'inFlight': return this.unsettled(slot, key, order);
      case 'claimed': break;
    }
    let reply: R;
    try {
      reply = await order.send(clientOrderId, expiresAt);
    } catch (err) {
      const notSent = certainlyNotSent(err);
      await (notSent ? this.o.ledger.release(this.o.nodeId, lease, clientOrderId) : this.o.ledger.markUncertain(this.o.nodeId, lease, clientOrderId))
        .catch((e: unknown) => this.o.log.warn('idempotency record not settled after a failed trade', { err: errorMessage(e) }));
      // The order may have gone and the account left this node meanwhile (its lease lost, or being
      // handed over: the shard stopped it, and with it the connection its reply would have come
      // on): not "reply lost, check /OpenedOrders", but 503, retry with the same id. The retry goes
      // to the next owner, which asks the broker about the record's request id and replays its
      // answer (lookedUp), or answers 409 if the broker does not know it. An id made here cannot be
      // retried, and an order not looked up (a gateway session's) would only meet 409: those keep
      // the shard's answer.
      if (!notSent && order.ownId && order.lookup && this.moved(key, lease)) throw stoppedError();
      throw err;
    }
    // The broker answered: the client gets it whatever happens to the record. A fenced write (the
    // lease moved on meanwhile) leaves the record 'sent': the new owner asks the broker (lookedUp).
    let recorded: { status: number; json: string };
    try {
      recorded = order.record(reply);
    } catch (err) {
      // An answer that cannot be recorded (a reply not of its shape): the claim is settled all the
      // same, as an order whose outcome is unknown; else it stayed open ('sent') for good and the
      // ledger kept its key for the life of the process.
      await this.o.ledger.markUncertain(this.o.nodeId, lease, clientOrderId)
        .catch((e: unknown) => this.o.log.warn('idempotency record not settled after an unrecordable answer', { err: errorMessage(e) }));
      throw err;
    }
    const written = await this.o.ledger.recordOutcome(this.o.nodeId, lease, clientOrderId, recorded.status, recorded.json)
      .catch((e: unknown) => errorMessage(e));
    if (written !== 'written') {
      this.o.log.warn('idempotency outcome not recorded', { accountId: key, outcome: written });
      // Not fenced (PostgreSQL failed): a retry here in this lease finds the record 'sent' at this
      // epoch, and gets this answer instead of a 409.
      if (written !== 'fenced') this.keepUnrecorded(slot, recorded);
    }
    return reply;
  }

  /**
   * A record an earlier owner left open (it died or lost the lease mid-call) or marked uncertain: the
   * broker is asked what it did with its order, as one node asks after a restart (SPEC §3: the same
   * id replays the original result). Executed: its answer, recorded under this lease and replayed.
   * Unknown to the broker (it may still be in transit from the earlier owner), or the record or the
   * broker cannot be read now: 409, nothing sent.
   */
  private async lookedUp<R>(key: string, lease: Lease, order: Order<R>): Promise<R> {
    const { clientOrderId, lookup } = order;
    if (!lookup) throw uncertain(clientOrderId);
    const found = await this.o.ledger.get(key, clientOrderId)
      .then((row) => (row && row.state !== 'result' ? lookup(clientOrderId, row.expires_at) : null))
      .catch((err: unknown) => {
        this.o.log.warn('cannot ask the broker about an order an earlier owner sent', { accountId: key, err: errorMessage(err) });
        return null;
      });
    let recorded: { status: number; json: string };
    try {
      if (found === null) throw uncertain(clientOrderId);
      recorded = order.record(found);
    } catch {
      throw uncertain(clientOrderId); // unknown to the broker, or an answer not of a reply's shape
    }
    const written = await this.o.ledger.adopt(this.o.nodeId, lease, clientOrderId, recorded.status, recorded.json).catch((e: unknown) => errorMessage(e));
    if (written !== 'written') this.o.log.warn('idempotency outcome of an earlier owner\'s order not recorded', { accountId: key, outcome: written });
    return order.replay(recorded.status, recorded.json);
  }

  /** The record is this node's, `sent` in this lease, and no order of it is under way here: its
   *  outcome could not be written. The answer if kept, else what the record says now. */
  private async unsettled<R>(slot: string, key: string, order: Order<R>): Promise<R> {
    const kept = this.unrecorded.get(slot);
    if (kept) return order.replay(kept.status, kept.json);
    const row = await this.o.ledger.get(key, order.clientOrderId);
    if (row?.state === 'result' && row.result_json !== null) return order.replay(row.status ?? 200, row.result_json);
    throw uncertain(order.clientOrderId);
  }

  private keepUnrecorded(slot: string, recorded: { status: number; json: string }): void {
    if (this.unrecorded.size >= UNRECORDED_MAX) this.unrecorded.delete(this.unrecorded.keys().next().value!);
    this.unrecorded.set(slot, recorded);
  }
}
