// The owner's side of a call, in cluster mode: what the router hands its local calls to (LocalShards).
// A trade reaches the node's shards only while this node holds the account's lease (by its own
// clock, with room for the dispatch) and after a fenced claim in PostgreSQL, so the idempotency
// contract holds across nodes: a retry on any node replays, waits or answers 409, and an owner that
// lost the account cannot send. Every trade gets a claim (a generated id when the client gave none),
// so fencing covers every order. Other commands pass through.
import { randomUUID } from 'node:crypto';
import { ApiError, apiError } from '../errors.js';
import type { Logger } from '../log.js';
import { TRADE_SCHEMAS } from '../market/orderSchemas.js';
import type { TradeReply } from '../runtime/hosts/accountCommands.js';
import { IDEMPOTENCY_TTL_MS, paramsHash } from '../runtime/hosts/accountTrade.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import type { IdempotencyLedger } from './idempotencyLedger.js';
import type { Lease } from './leases.js';
import type { LocalShards } from './router.js';

export interface FencedShardsOptions {
  nodeId: string;
  shards: LocalShards;
  keeper: { leaseOf(accountId: string, forMs?: number): Lease | undefined };
  ledger: IdempotencyLedger;
  /** Idempotency record times (the gateway's clock, as on one node). */
  clock: Clock;
  /** The lease must still hold this long when a trade is handed to the shard, which sends it at
   *  once (default 250 ms). Kept well under a renewal period: with a short lease (1.5 s, renewed
   *  every 0.5 s) a margin of a second refused trades between renewals while the node held the lease. */
  dispatchMarginMs?: number;
  log: Logger;
}

type TradeArgs = ArgsOf<'account.trade'>;

// Refusals a shard makes before anything is sent: the claim is freed so a corrected retry can go.
const NOT_SENT = new Set(['NOT_CONNECTED', 'STORAGE_UNAVAILABLE', 'NOT_ON_THIS_TERMINAL']);
function certainlyNotSent(err: unknown): boolean {
  return err instanceof ApiError && (NOT_SENT.has(err.code) || (err.status >= 400 && err.status < 500 && err.code !== 'IDEMPOTENCY_UNCERTAIN'));
}

/** The claim could not be written (PostgreSQL unreachable or too slow): nothing was sent. */
const noLedger = () => apiError('SERVICE_UNAVAILABLE', 'the cluster database cannot be reached, so the order was not sent; retry', { headers: { 'retry-after': '1' } });
const notOwner = (accountId: string) => apiError('SERVICE_UNAVAILABLE', `this node no longer holds account ${accountId} (it is being taken over); retry`, { headers: { 'retry-after': '1' } });

export class FencedShards implements LocalShards {
  constructor(private readonly o: FencedShardsOptions) {}

  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>> {
    if (op !== 'account.trade') return this.o.shards.call(key, op, args, opts);
    return this.trade(key, args as TradeArgs, opts) as Promise<ResultOf<C>>;
  }

  private async trade(key: string, a: TradeArgs, opts?: CallOptions): Promise<TradeReply> {
    const lease = this.o.keeper.leaseOf(key, this.o.dispatchMarginMs ?? 250);
    if (!lease) throw notOwner(key);
    const parsed = TRADE_SCHEMAS[a.op]?.safeParse(a.args);
    // Unreadable: the shard answers 400 with the parameters named, and sends nothing.
    if (!parsed?.success) return this.o.shards.call(key, 'account.trade', a, opts);
    const clientOrderId = a.clientOrderId ?? `c-${randomUUID()}`;
    const now = this.o.clock.now();
    const claim = await this.o.ledger.claim({
      owner: this.o.nodeId, lease, clientOrderId, paramsHash: paramsHash(a.op, parsed.data), now, expiresAt: now + IDEMPOTENCY_TTL_MS,
    }).catch((err: unknown) => {
      // A driver error (refused, reset, timed out) is a 503 like any unreachable engine, not a 500.
      this.o.log.warn('idempotency claim failed: order not sent', { accountId: key, err: errorMessage(err) });
      throw noLedger();
    });
    switch (claim.kind) {
      case 'fenced': throw notOwner(key);
      case 'replay': return { status: claim.status, json: claim.resultJson, replay: true };
      case 'mismatch': throw apiError('IDEMPOTENCY_KEY_REUSED', `clientOrderId ${clientOrderId} was used with other parameters`);
      case 'uncertain': throw apiError('IDEMPOTENCY_UNCERTAIN', `the order with clientOrderId ${clientOrderId} may have been executed (its node stopped before the broker answered); it is not sent again`);
      // This node's own request with the id is out: its shard makes the retry wait for it and replay.
      case 'inFlight': return this.o.shards.call(key, 'account.trade', { ...a, clientOrderId }, opts);
      case 'claimed': break;
    }
    let reply: TradeReply;
    try {
      reply = await this.o.shards.call(key, 'account.trade', { ...a, clientOrderId }, opts);
    } catch (err) {
      await (certainlyNotSent(err) ? this.o.ledger.release(this.o.nodeId, lease, clientOrderId) : this.o.ledger.markUncertain(this.o.nodeId, lease, clientOrderId))
        .catch((e: unknown) => this.o.log.warn('idempotency record not settled after a failed trade', { err: errorMessage(e) }));
      throw err;
    }
    // The broker answered: the client gets it whatever happens to the record. A fenced write (the
    // lease moved on meanwhile) leaves the record 'sent', so the new owner answers retries 409.
    const written = await this.o.ledger.recordOutcome(this.o.nodeId, lease, clientOrderId, reply.status, reply.json)
      .catch((e: unknown) => errorMessage(e));
    if (written !== 'written') this.o.log.warn('idempotency outcome not recorded', { accountId: key, outcome: written });
    return reply;
  }
}
