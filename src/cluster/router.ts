// Cluster mode's choke point: every route and the stream hub reach an account through
// `call(key, op, args, opts)`, the signature of ShardSet.call, so they use this unchanged. The key's
// owner (OwnerDirectory) decides: this node -> its own shards; another node -> a NATS request on
// `tagw.node.<owner>.call`, answered there by that node's shards (serve()); nobody (a takeover) ->
// wait for an owner up to `ownerWaitMs`, then 503 with retry-after. NATS down -> 503 at once.
// Values cross as tagged JSON (wireCodec.ts), so a result arrives as a shard's reply would.
import type { Msg, Subscription } from '@nats-io/transport-node';
import { ApiError, apiError, fromWire, toWire, type WireError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import type { NatsLink } from './natsLink.js';
import type { OwnerDirectory, OwnerInfo } from './owners.js';
import { mayRunAgain, NotHeldError } from './moves.js';
import { NoReplyError, ReplyInbox } from './replyInbox.js';
import { partSize, ReplyParts, type PartRequest, type PartsHandle } from './replyParts.js';
import { OwnerStreams } from './ownerStreams.js';
import { StreamInterest } from './streamInterest.js';
import { SUBJECTS } from './subjects.js';
import { decode, encode } from './wireCodec.js';

/** What a node's own shards offer the router (ShardSet has it). */
export interface LocalShards {
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>>;
}

/** A forwarded call, as it travels (JSON, wireCodec); `from`: the node that forwarded it, `inc`: its
 *  incarnation (the process's start, for stream commands). */
export interface CallEnvelope { key: string; op: CommandName; args: unknown; from: string; inc?: number; retry?: boolean }
/** The owner's answer; notOwner: it does not own the key (any more), owner is whom it believes does. */
export type CallReply =
  /** epoch: the owner's lease epoch, on the replies to stream commands (the caller notes where its
   *  sockets' streams are open: a restarted owner's shard must get them again). */
  | { ok: true; result: unknown; epoch?: number }
  | { ok: false; error: WireError }
  | { ok: false; notOwner: true; owner: string | null }
  /** Too large for one message: fetch `parts` parts of the encoded reply (replyParts.ts). */
  | { ok: 'parts'; id: string; parts: number };

export interface AccountRouterOptions {
  nodeId: string;
  /** This process's start (leases.ts newIncarnation), sent with stream commands. */
  incarnation?: number;
  link: NatsLink;
  shards: LocalShards;
  owners: OwnerDirectory;
  log: Logger;
  /** CLUSTER_OWNER_WAIT_MS: how long a call waits for an account without owner. */
  ownerWaitMs: number;
  /** Bound of one forwarded call (the owner's own shard timeout is 30 s; a bit more). */
  forwardTimeoutMs?: number;
  /** While waiting for an owner, look again at least this often (an announcement may be lost). */
  recheckMs?: number;
  /** Monotonic milliseconds (injected in tests). */
  now?: () => number;
}

export interface RouterStats {
  /** Calls sent to another node and answered by it (a result or an error). */
  forwarded: number;
  /** Calls other nodes sent here and this node answered. */
  served: number;
  /** Calls that found no owner and waited for one. */
  ownerWaits: number;
  /** Calls answered 503 because no owner could be reached in time, or NATS was down. */
  unavailable: number;
  /** Streams of this node's sockets opened again at an account's new owner. */
  streamReplays: number;
}

/** `late`: the account moved on while the call waited at this owner; its reply, if it still comes. */
type Attempt = { done: true; value: unknown; epoch?: number } | { done: false; notOwner: boolean; late?: Late };
interface Late { owner: string; reply: Promise<Msg> }
/** What a forwarded call waiting for its reply is about; `epoch`: the owner's lease epoch this node
 *  knew when it sent the call (0: none known); `moved`: told when the account moves on, if the new
 *  owner may run the call too (moves.ts). */
interface Forwarded { key: string; owner: string; op: CommandName; epoch: number; moved?: () => void }
/** An owner, at the lease epoch this node knew of it. */
type At = OwnerInfo & { owner: string };
/** Which owner answered a routed call, and the epoch it said it holds (stream commands). */
interface Routed { owner: string; epoch?: number }

export class AccountRouter {
  readonly stats: RouterStats = { forwarded: 0, served: 0, ownerWaits: 0, unavailable: 0, streamReplays: 0 };
  /** The owner's side of stream commands: what each node's sockets hold here (ownerStreams.ts); a
   *  node that left or started again (forgetNode, supersede); the edge's resync (onReopened). */
  readonly streams: OwnerStreams;
  /** What this node's own sockets hold, wherever the accounts are owned, and at which owner. */
  private readonly held = new StreamInterest();
  private readonly heldAt = new Map<string, At>();
  private readonly offOwners: () => void;
  private subs: Subscription[] = [];
  /** Large replies waiting for their parts to be fetched. */
  private readonly parts: ReplyParts;
  /** Where the replies to this node's forwarded calls arrive; each waiting call tagged with its
   *  account, the owner it went to and its op, so a NATS outage or a move can end it. */
  private readonly inbox: ReplyInbox<Forwarded>;
  private offStatus: (() => void) | undefined;
  private readonly now: () => number;
  private readonly forwardTimeoutMs: number;
  private readonly recheckMs: number;

  constructor(private readonly opts: AccountRouterOptions) {
    this.streams = new OwnerStreams(opts.nodeId, opts.shards, opts.log);
    this.now = opts.now ?? (() => performance.now());
    this.forwardTimeoutMs = opts.forwardTimeoutMs ?? 31_000;
    this.recheckMs = opts.recheckMs ?? 250;
    this.parts = new ReplyParts(this.forwardTimeoutMs);
    this.inbox = new ReplyInbox<Forwarded>(opts.link.nc, this.now);
    this.offOwners = opts.owners.onChange((accountId, owner, epoch) => {
      if (owner !== opts.nodeId) this.interest.dropAccount(accountId);
      if (owner === null) return;
      const at = this.heldAt.get(accountId);
      // Another owner, or the same one at a later epoch (restarted under its NODE_ID, or its lease
      // lost and taken back): either way its shards started the account knowing no other node's sockets.
      if (at !== undefined && (at.owner !== owner || at.epoch < epoch)) void this.replay(accountId, { owner, epoch });
      this.movedWhileAway(accountId, { owner, epoch });
    });
    // NATS dropped with calls in flight: their replies may come after the reconnect, or be lost
    // (published before this node subscribed its inbox again). Give them the owner wait, then 503.
    this.offStatus = opts.link.onStatus((up) => {
      if (up) return;
      const waiting = this.inbox.waitingIds();
      if (waiting.length === 0) return;
      setTimeout(() => {
        if (this.opts.link.up) return;
        this.inbox.abort(waiting, () => this.unavailable('the connection to the cluster\'s messaging (NATS) was lost during the call; its outcome is unknown'));
      }, opts.ownerWaitMs).unref();
    });
  }

  /** What each node's sockets hold of the streams of accounts owned here (and which symbols other
   *  nodes' sockets want: the relay publishes only those). */
  get interest(): StreamInterest {
    return this.streams.interest;
  }

  /** Starts answering the calls other nodes forward here. */
  serve(): void {
    if (this.subs.length) return;
    const nc = this.opts.link.nc;
    this.subs.push(nc.subscribe(SUBJECTS.nodeCall(this.opts.nodeId), {
      callback: (err, msg) => {
        if (err) this.opts.log.error('forwarded-call subscription ended', { err: errorMessage(err) });
        else void this.answer(msg);
      },
    }));
    // A node back from a lapse: what its sockets held here goes (as for a departed node) before it replays them.
    this.subs.push(nc.subscribe(SUBJECTS.nodeForget(this.opts.nodeId), {
      callback: (err, msg) => {
        if (err) return;
        void this.streams.forgetNode(msg.string()).finally(() => msg.respond('ok'));
      },
    }));
    this.subs.push(nc.subscribe(SUBJECTS.nodePart(this.opts.nodeId), {
      callback: (err, msg) => {
        if (err) return this.opts.log.error('reply-part subscription ended', { err: errorMessage(err) });
        let chunk: Uint8Array | null = null;
        try {
          chunk = this.parts.take(msg.json<PartRequest>());
        } catch {
          chunk = null;
        }
        try {
          msg.respond(chunk ?? new Uint8Array(0));
        } catch (e) {
          this.opts.log.warn('could not send a reply part', { err: errorMessage(e) });
        }
      },
    }));
  }

  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts: CallOptions = {}): Promise<ResultOf<C>> {
    // Not a stream command (an order, a read): nothing to note before or after, so the caller awaits
    // route's own promise (each async layer between them costs microtask turns on every call).
    if (!op.startsWith('stream.')) return this.route(key, op, args, opts) as Promise<ResultOf<C>>;
    return this.callStream(key, op, args, opts);
  }

  private async callStream<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts: CallOptions): Promise<ResultOf<C>> {
    // A close counts even when it fails: the next owner must not reopen what nobody holds.
    if (op === 'stream.close') this.hold(key, op, args, this.heldAt.get(key) ?? { owner: '', epoch: 0 });
    const at: Routed = { owner: '' };
    const value = await this.route(key, op, args, opts, at);
    // An owner's epoch this node had not heard of yet (it restarted, its announcement still on the
    // way): learned before noting this call, so the reopen it starts is of the streams held before.
    if (at.epoch !== undefined) this.opts.owners.learn(key, { owner: at.owner, epoch: at.epoch });
    if (op !== 'stream.close') this.hold(key, op, args, { owner: at.owner, epoch: this.epochOf(key, at.owner) });
    return value as ResultOf<C>;
  }

  /** Runs the call where the key's owner is; its answer. `at`, if given, is told which owner gave
   *  it (and the epoch that owner said it holds, if it said). */
  private async route(key: string, op: CommandName, args: unknown, opts: CallOptions, at?: Routed): Promise<unknown> {
    const deadline = this.now() + this.opts.ownerWaitMs;
    let waited = false;
    let redirected = false;
    let late: Late | undefined;
    try {
      for (;;) {
        // The cache's answer when it has one (no await: the common case); the lease store's otherwise.
        const cached = this.opts.owners.fresh(key);
        const owner = cached !== undefined ? cached : await this.ownerOf(key);
        if (owner === this.opts.nodeId) {
          if (at) at.owner = owner;
          try {
            return await this.runHere(this.opts.nodeId, key, op, args, opts);
          } catch (err) {
            // Handing the account over, or its lease lapsed: nothing ran; on to the next owner.
            if (!(err instanceof NotHeldError)) throw err;
            this.opts.owners.forget(key);
            if (!redirected) {
              redirected = true;
              continue;
            }
          }
        } else if (owner !== null) {
          const env: CallEnvelope = { key, op, args, from: this.opts.nodeId, ...(opts.retryOnRestart === undefined ? {} : { retry: opts.retryOnRestart }) };
          if (this.opts.incarnation !== undefined && op.startsWith('stream.')) env.inc = this.opts.incarnation;
          const a = await this.forward(owner, env);
          if (a.done) {
            if (at) {
              at.owner = owner;
              if (a.epoch !== undefined) at.epoch = a.epoch;
            }
            return a.value;
          }
          // Moved on while the call waited there: to the new owner (known now) at once.
          if (a.late) {
            late = a.late;
            continue;
          }
          this.opts.owners.forget(key);
          // Told where the account went: ask again at once, once; otherwise wait for news.
          if (a.notOwner && !redirected) {
            redirected = true;
            continue;
          }
        }
        await this.waitForOwner(key, deadline, !waited);
        waited = true;
      }
    } catch (err) {
      // The new owner found the old one's claim of this order: the old owner's answer says more.
      if (late && err instanceof ApiError && err.code === 'IDEMPOTENCY_UNCERTAIN') return this.lateAnswer(late, err);
      throw err;
    }
  }

  /** No owner to run the call now: waits for news of one (or `recheckMs`), or 503 past the deadline. */
  private async waitForOwner(key: string, deadline: number, first: boolean): Promise<void> {
    const left = deadline - this.now();
    if (left <= 0) throw this.unavailable(`account ${key} has no reachable owner yet (a node is taking it over); retry`);
    if (first) this.stats.ownerWaits++;
    await this.ownerChange(key, Math.min(left, this.recheckMs));
  }

  /** The old owner's answer; else (none within the owner wait, or not held) the new owner's `uncertain`. */
  private async lateAnswer(late: Late, uncertain: ApiError): Promise<unknown> {
    const msg = await late.reply.catch(() => undefined);
    const a = msg && (await this.reply(late.owner, msg));
    if (a?.done) return a.value;
    throw uncertain;
  }

  /** The owner's lease epoch as this node knows it (0: unknown, or the cache moved on to another owner). */
  private epochOf(key: string, owner: string): number {
    const k = this.opts.owners.known(key);
    return k?.owner === owner ? k.epoch : 0;
  }

  /** Notes what this node's own hub holds of an account's stream (any owner): replayed at the next
   *  owner, or at the same one's next epoch. */
  private hold(key: string, op: CommandName, args: unknown, at: At): void {
    const me = this.opts.nodeId;
    if (op === 'stream.open') this.held.open(me, key);
    else if (op === 'stream.close') this.held.close(me, key);
    else if (op === 'stream.sub') {
      const a = args as ArgsOf<'stream.sub'>;
      this.held.sub(me, key, a.symbol, a.timeframes);
    } else if (op === 'stream.unsub') {
      const a = args as ArgsOf<'stream.unsub'>;
      this.held.unsub(me, key, a.symbol, a.timeframes);
    } else return;
    if (this.held.holding(me, key)) this.heldAt.set(key, at);
    else this.heldAt.delete(key);
  }

  /** The account changed owner (or its owner's lease epoch): the owner's shard knows nothing of this
   *  node's sockets; open and subscribe there what they hold, so its events (relayed) reach them again. */
  private async replay(accountId: string, at: At): Promise<void> {
    const { owner } = at;
    const h = this.held.holding(this.opts.nodeId, accountId);
    if (!h) return;
    this.heldAt.set(accountId, at);
    try {
      for (let i = 0; i < h.opens; i++) await this.route(accountId, 'stream.open', { accountId }, {});
      for (const [symbol, timeframes] of h.symbols) {
        await this.route(accountId, 'stream.sub', { accountId, symbol, timeframes, timeoutMs: this.opts.ownerWaitMs }, {});
      }
      this.stats.streamReplays++;
    } catch (err) {
      this.opts.log.warn('could not reopen a stream at the account\'s new owner', { accountId, owner, err: errorMessage(err) });
    }
  }

  /** The owner cache's answer; the lease store failing behind it is a 503 like NATS's, not a 500. */
  private async ownerOf(key: string): Promise<string | null> {
    try {
      return await this.opts.owners.ownerOf(key);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      this.opts.log.warn('owner lookup failed', { accountId: key, err: errorMessage(err) });
      throw this.unavailable('the cluster\'s lease store could not say which node owns this account; retry', err);
    }
  }

  /** One try at the owner: its answer, or why there was none to be had. */
  private async forward(owner: string, env: CallEnvelope): Promise<Attempt> {
    if (!this.opts.link.up) throw this.unavailable('the cluster\'s messaging (NATS) is unreachable from this node; retry');
    let msg: Msg;
    try {
      const tag: Forwarded = { key: env.key, owner, op: env.op, epoch: this.epochOf(env.key, owner) };
      const reply = this.inbox.request(SUBJECTS.nodeCall(owner), encode(env), this.forwardTimeoutMs, tag);
      if (!mayRunAgain(env.op, env.args, env.retry)) msg = await reply;
      else {
        // Not Promise.race: one promise fewer on the forwarding path.
        const first = await new Promise<Msg | undefined>((resolve, reject) => {
          tag.moved = () => resolve(undefined);
          reply.then(resolve, reject);
        });
        if (first === undefined) {
          reply.catch(() => undefined); // ended by the stranded call's abort unless awaited
          return { done: false, notOwner: false, late: { owner, reply } };
        }
        msg = first;
      }
    } catch (err) {
      if (err instanceof ApiError) throw err;
      // No responders: the owner is not listening (stopped, died, restarting); wait for the next.
      if (err instanceof NoReplyError && err.reason === 'noResponders') return { done: false, notOwner: false };
      if (err instanceof NoReplyError && err.reason === 'timeout') {
        throw this.unavailable(`the node owning account ${env.key} did not answer ${env.op} in time; its outcome is unknown`);
      }
      throw this.unavailable(`the cluster's messaging (NATS) failed during ${env.op}; retry`, err);
    }
    return this.reply(owner, msg);
  }

  /** An owner's reply to a forwarded call, as an attempt (a result) or its error, thrown. */
  private async reply(owner: string, msg: Msg): Promise<Attempt> {
    let reply = decode(msg.string()) as CallReply;
    if (reply.ok === 'parts') reply = await this.fetchParts(owner, reply);
    if (reply.ok === true) {
      this.stats.forwarded++;
      return { done: true, value: reply.result, ...(reply.epoch === undefined ? {} : { epoch: reply.epoch }) };
    }
    if ('notOwner' in reply) return { done: false, notOwner: true };
    if (!('error' in reply)) throw this.unavailable('the owner node answered in parts within parts; retry');
    this.stats.forwarded++;
    throw fromWire(reply.error);
  }

  /** A node SIGKILLed a moment ago may still get a request (nats-server routes to its connection
   *  until it notices the close) and never answer. Once another node holds the account (or the same
   *  node id again, restarted, at a later epoch), the old one has the owner wait to answer the calls
   *  it has (a live one finishing a slow call still does), then 503. */
  private movedWhileAway(accountId: string, at: At): void {
    const stranded = this.inbox.waitingIds((f) => {
      if (f.key !== accountId || (f.owner === at.owner && f.epoch >= at.epoch)) return false;
      // A call the new owner may run too goes there now (the old owner's answer then only counts if
      // the new one found its claim: lateAnswer). Not on an epoch never known: maybe no move at all.
      if (f.owner !== at.owner || f.epoch > 0) f.moved?.();
      return true;
    });
    if (stranded.length === 0) return;
    setTimeout(() => {
      this.inbox.abort(stranded, (f) => this.unavailable(`account ${f.key} moved to another node while ${f.op} was at the old one, which did not answer; its outcome is unknown`));
    }, this.opts.ownerWaitMs).unref();
  }

  /** The parts of a large reply, in order, joined and decoded. */
  private async fetchParts(owner: string, h: PartsHandle): Promise<CallReply> {
    const chunks: Uint8Array[] = [];
    for (let i = 0; i < h.parts; i++) {
      const req: PartRequest = { id: h.id, i };
      const m = await this.opts.link.nc.request(SUBJECTS.nodePart(owner), JSON.stringify(req), { timeout: this.forwardTimeoutMs })
        .catch((err: unknown) => { throw this.unavailable('a large reply could not be fetched from the owner node; retry', err); });
      if (m.data.length === 0) throw this.unavailable('the owner node no longer had a large reply when it was fetched; retry');
      chunks.push(m.data);
    }
    return decode(Buffer.concat(chunks).toString('utf8')) as CallReply;
  }

  /** Resolves on an owner change of `key`, or after `ms`. */
  private ownerChange(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const off = this.opts.owners.onChange((k, owner) => {
        if (k !== key || owner === null) return;
        clearTimeout(timer);
        off();
        resolve();
      });
      const timer = setTimeout(() => {
        off();
        resolve();
      }, ms);
    });
  }

  /** The owner's side: run a forwarded call on its own shards, if it owns the key. */
  private async answer(msg: Msg): Promise<void> {
    let reply: CallReply;
    try {
      const env = decode(msg.string()) as CallEnvelope;
      if (typeof env?.key !== 'string' || typeof env.op !== 'string') throw apiError('BAD_REQUEST', 'malformed forwarded call');
      const cached = this.opts.owners.fresh(env.key);
      const owner = cached !== undefined ? cached : await this.ownerOf(env.key);
      if (owner !== this.opts.nodeId) {
        this.interest.dropAccount(env.key);
        reply = { ok: false, notOwner: true, owner };
      } else {
        const opts: CallOptions = env.retry === undefined ? {} : { retryOnRestart: env.retry };
        // A stream command of a node's new process: what its earlier one held here goes first.
        if (env.inc !== undefined && !(await this.streams.supersede(String(env.from), env.inc))) {
          throw this.unavailable(`a stream command of an earlier process of node ${String(env.from)}, which was started again; retry`);
        }
        const result = await this.runHere(String(env.from), env.key, env.op, env.args, opts);
        const epoch = env.op.startsWith('stream.') ? this.opts.owners.known(env.key)?.epoch : undefined;
        reply = epoch === undefined ? { ok: true, result } : { ok: true, result, epoch };
      }
    } catch (err) {
      // Refused before it ran (handing over, lease lapsed): the caller waits for the next owner.
      reply = err instanceof NotHeldError ? { ok: false, notOwner: true, owner: null } : { ok: false, error: toWire(err) };
    }
    this.stats.served++;
    let out: Uint8Array | string = encode(reply);
    const size = partSize(this.opts.link.nc.info?.max_payload);
    if (out.length * 3 > size) {
      // Possibly past the server's message limit (UTF-8 is up to 3 bytes a char): measure.
      const bytes = Buffer.from(out, 'utf8');
      out = bytes.length > size ? JSON.stringify({ ok: 'parts', ...this.parts.keep(bytes, size) }) : bytes;
    }
    try {
      if (!msg.respond(out)) this.opts.log.warn('could not answer a forwarded call (no reply subject)');
    } catch (err) {
      // Closed or draining connection: the caller's wait ends with its own bound.
      this.opts.log.warn('could not answer a forwarded call', { op: reply.ok === true ? 'result' : 'error', err: errorMessage(err) });
    }
  }

  /** Runs a call on this node's shards for `origin` (this node, or the node that forwarded it).
   *  Stream interest goes through the ledger (streamInterest.ts), so nodes' hubs compose. */
  private runHere(origin: string, key: string, op: CommandName, args: unknown, opts: CallOptions): Promise<unknown> {
    // Not a stream command: the shard's own promise (no async layer of this router's in between).
    if (!op.startsWith('stream.')) return this.opts.shards.call(key, op, args as never, opts);
    return this.streams.run(origin, key, op, args, opts);
  }

  /**
   * This node's heartbeat lapsed for a lease or more: the owners may have judged it departed and
   * released what its sockets held (forgetNode). Each remote owner is asked to forget it (a no-op
   * if it already did), then this node's holds there are opened again, so the owner's ledger holds
   * exactly them, once, whether or not it had released them.
   */
  async rejoin(): Promise<void> {
    const me = this.opts.nodeId;
    const byOwner = new Map<string, string[]>();
    for (const [accountId, at] of this.heldAt) if (at.owner !== me && at.owner !== '') byOwner.set(at.owner, [...(byOwner.get(at.owner) ?? []), accountId]);
    for (const [owner, accounts] of byOwner) {
      try {
        await this.opts.link.nc.request(SUBJECTS.nodeForget(owner), me, { timeout: this.opts.ownerWaitMs });
      } catch (err) {
        // Not answering (gone, or NATS down): its successor starts the accounts knowing no sockets; the move replays them.
        this.opts.log.warn('a lapsed node could not ask an owner to forget it', { owner, err: errorMessage(err) });
        continue;
      }
      for (const accountId of accounts) {
        const at = this.heldAt.get(accountId);
        if (at?.owner === owner) await this.replay(accountId, at);
      }
    }
  }

  private unavailable(message: string, cause?: unknown): ApiError {
    this.stats.unavailable++;
    return apiError('SERVICE_UNAVAILABLE', message, { headers: { 'retry-after': '1' }, ...(cause === undefined ? {} : { cause }) });
  }

  /** Stops answering forwarded calls (the owner hands its accounts over before this). */
  close(): void {
    for (const sub of this.subs) sub.unsubscribe();
    this.subs = [];
    this.inbox.close();
    this.parts.clear();
    this.offStatus?.();
    this.offOwners();
  }
}
