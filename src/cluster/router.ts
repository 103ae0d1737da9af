// Cluster mode's choke point: every route and the stream hub reach an account through
// `call(key, op, args, opts)`, the signature of ShardSet.call, so they use this unchanged. The key's
// owner (OwnerDirectory) decides: this node -> its own shards; another node -> a NATS request on
// `tagw.node.<owner>.call`, answered there by that node's shards (serve()); nobody (a takeover) ->
// wait for an owner up to `ownerWaitMs`, then 503 with retry-after. NATS down -> 503 at once.
// Values cross as tagged JSON (wireCodec.ts), so a result arrives as a shard's reply would.
// Here: where a call goes (owner lookup, waits, redirects) and what this node's sockets hold; the
// wire of one forwarded call is callForwarder.ts, the serving of other nodes' calls callServer.ts.
import { ApiError, apiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { CallOptions } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import { CallForwarder, epochOf, type At, type CallEnvelope, type Late } from './callForwarder.js';
import { CallServer } from './callServer.js';
import type { Alive } from './liveness.js';
import type { NatsLink } from './natsLink.js';
import type { OwnerDirectory } from './owners.js';
import { keyedTrade, NotHeldError } from './moves.js';
import { isNoOpenStream } from '../runtime/hosts/streamCommands.js';
import { OwnerStreams, releasedBy } from './ownerStreams.js';
import { StreamInterest } from './streamInterest.js';
import { SUBJECTS } from './subjects.js';

/** Sends of a stream.close that reached no owner (closeAgain): about two minutes of them. */
const CLOSE_AGAIN_ATTEMPTS = 30;

/** What a node's own shards offer the router (ShardSet has it). */
export interface LocalShards {
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>>;
}

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
  /** Whether a node's process is on NATS (liveness.ts): the owners of forwarded calls waiting a while
   *  are asked every `probeEveryMs` (default a quarter of the owner wait, 100-1,000 ms). */
  liveness?: { ask(nodeId: string): Promise<Alive> };
  probeEveryMs?: number;
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
  /** One call at another node's owner, its reply, and the calls left waiting when an account moves. */
  private readonly forwarder: CallForwarder;
  /** The calls other nodes forward here. */
  private readonly server: CallServer;
  private readonly now: () => number;
  private readonly recheckMs: number;
  /** Per owner: this node's ask to be forgotten there and the reopening of what its sockets hold
   *  (resyncAt), while it runs; whoever needs one then waits for it. */
  private readonly resyncs = new Map<string, Promise<void>>();
  private closed = false;

  constructor(private readonly opts: AccountRouterOptions) {
    this.streams = new OwnerStreams(opts.nodeId, opts.shards, opts.log);
    this.now = opts.now ?? (() => performance.now());
    const forwardTimeoutMs = opts.forwardTimeoutMs ?? 31_000;
    this.recheckMs = opts.recheckMs ?? 250;
    // Both count in this router's stats and answer 503 through its unavailable().
    const unavailable = (message: string, cause?: unknown) => this.unavailable(message, cause);
    const { link, owners, nodeId, log, ownerWaitMs } = opts;
    const probeEveryMs = opts.probeEveryMs ?? Math.min(1_000, Math.max(100, Math.floor(ownerWaitMs / 4)));
    this.forwarder = new CallForwarder({
      link, owners, ownerWaitMs, forwardTimeoutMs, now: this.now, stats: this.stats, unavailable,
      ...(opts.liveness ? { liveness: opts.liveness, probeEveryMs } : {}),
    });
    this.server = new CallServer({
      nodeId, link, owners, log, streams: this.streams, partsTtlMs: forwardTimeoutMs, stats: this.stats, unavailable,
      ownerOf: (key) => this.ownerOf(key),
      run: (origin, key, op, args, o) => this.runHere(origin, key, op, args, o),
      released: (owner) => void this.rejoinAt(owner),
      // After the turn's other messages: a stream.open answered just before the owner's shard died
      // (its reply in the same read) is counted in what this node holds first.
      reopen: (owner, ids) => void setImmediate(() => this.reopen(owner, ids)),
    });
    this.streams.onReleased = (node) => {
      try {
        link.nc.publish(SUBJECTS.nodeReleased(node), nodeId);
      } catch (err) {
        log.warn('could not tell a node its streams were released', { node, err: errorMessage(err) });
      }
    };
    this.streams.onLost = (node, accounts) => {
      try {
        link.nc.publish(SUBJECTS.nodeReopen(node), JSON.stringify({ owner: nodeId, accounts }));
      } catch (err) {
        log.warn('could not tell a node to open its streams again on a restarted shard', { node, err: errorMessage(err) });
      }
    };
    this.offOwners = opts.owners.onChange((accountId, owner, epoch) => {
      if (owner !== opts.nodeId) this.interest.dropAccount(accountId);
      if (owner === null) return;
      const at = this.heldAt.get(accountId);
      // Another owner, or the same one at a later epoch (restarted under its NODE_ID, or its lease
      // lost and taken back): either way its shards started the account knowing no other node's sockets.
      if (at !== undefined && (at.owner !== owner || at.epoch < epoch)) void this.replay(accountId, { owner, epoch });
      this.forwarder.movedWhileAway(accountId, { owner, epoch });
    });
  }

  /** What each node's sockets hold of the streams of accounts owned here (and which symbols other
   *  nodes' sockets want: the relay publishes only those). */
  get interest(): StreamInterest {
    return this.streams.interest;
  }

  /** Starts answering the calls other nodes forward here. */
  /** Takes no more forwarded calls, answering those in hand (CallServer.stopCalls). */
  stopServing(limitMs: number): Promise<void> {
    return this.server.stopCalls(limitMs);
  }

  serve(): void {
    this.server.serve();
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
    const after = this.heldAt.get(key);
    const at: Routed = { owner: '' };
    let value: unknown;
    try {
      value = await this.route(key, op, args, opts, at);
    } catch (err) {
      // Never sent (no owner found: the lease store failing, PostgreSQL away): the owner still counts
      // the open; sent again until it has it (closeAgain). One sent and not answered may have run.
      if (op === 'stream.close' && at.owner === '') this.closeAgain(key, args as ArgsOf<'stream.close'>, after);
      value = await this.afterLost(key, op, args, opts, at, err);
    }
    // An owner's epoch this node had not heard of yet (it restarted, its announcement still on the
    // way): learned before noting this call, so the reopen it starts is of the streams held before.
    if (at.epoch !== undefined) this.opts.owners.learn(key, { owner: at.owner, epoch: at.epoch });
    if (op !== 'stream.close') this.hold(key, op, args, { owner: at.owner, epoch: epochOf(this.opts.owners, key, at.owner) });
    return value as ResultOf<C>;
  }

  /**
   * A stream command failed because the owner does not hold what this node's sockets hold there:
   * it released them (judged this node departed while it was frozen: releasedBy), or its shard has
   * no stream of the account under a sub or snapshot of a socket that holds one (NOT_FOUND, no open
   * stream). Either way a socket would stay open and get nothing. This node asks the owner to forget
   * it and opens there again what its sockets hold (resyncAt), then runs the command again, once; a
   * close is not sent again (what it let go of is not among what was opened again). Anything else,
   * or the owner not answering: the error as it came.
   */
  private async afterLost(key: string, op: CommandName, args: unknown, opts: CallOptions, at: Routed, err: unknown): Promise<unknown> {
    const me = this.opts.nodeId;
    let owner = releasedBy(err);
    if (owner === undefined && (op === 'stream.sub' || op === 'stream.snapshot') && isNoOpenStream(err) && at.owner !== me
      && at.owner !== '' && (this.held.holding(me, key)?.opens ?? 0) > 0) owner = at.owner;
    if (owner === undefined || owner === me) throw err;
    try {
      await this.resyncAt(owner);
    } catch (e) {
      this.opts.log.warn('could not open a stream again at the account\'s owner', { accountId: key, owner, err: errorMessage(e) });
      throw err;
    }
    if (op === 'stream.close') return { ok: true };
    return this.route(key, op, args, opts, at);
  }

  /**
   * A stream.close that reached no owner, sent again (backing off to the owner wait) until one takes
   * it, for about two minutes. Given up once this node's hold of the account changed (`after`: a
   * socket opened it again, or an owner change reopened it there): the owner's count then came from
   * that open or replay, which a late close would cut below what this node's sockets hold. A close
   * reaching an owner that has none of this node's opens of it does nothing (OwnerStreams.run).
   * Before, the owner kept the open until the account moved: its stream and relay for no socket.
   */
  private closeAgain(key: string, args: ArgsOf<'stream.close'>, after: At | undefined): void {
    void (async () => {
      for (let attempt = 0; attempt < CLOSE_AGAIN_ATTEMPTS; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, Math.min(this.opts.ownerWaitMs, 250 * 2 ** attempt)).unref?.());
        if (this.closed || this.heldAt.get(key) !== after) return;
        const at: Routed = { owner: '' };
        try {
          await this.route(key, 'stream.close', args, {}, at);
          return;
        } catch (err) {
          if (at.owner !== '') return; // sent this time: it may have run
          if (attempt % 10 === 0) this.opts.log.warn('a stream close reached no owner; sending it again', { accountId: key, attempt, err: errorMessage(err) });
        }
      }
    })();
  }

  /** Runs the call where the key's owner is; its answer. `at`, if given, is told which owner gave
   *  it (and the epoch that owner said it holds, if it said), or the last owner it was sent to. */
  private async route(key: string, op: CommandName, args: unknown, opts: CallOptions, at?: Routed): Promise<unknown> {
    const deadline = this.now() + this.opts.ownerWaitMs;
    let waited = false;
    let redirected = false;
    let late: Late | undefined;
    /** An owner (at an epoch) that fell silent with this call there: not sent there again. */
    let silent: At | undefined;
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
        } else if (owner !== null && silent?.owner === owner && epochOf(this.opts.owners, key, owner) <= silent.epoch) {
          // Still the owner that fell silent: wait for the lease to move (looked up afresh each time).
          this.opts.owners.forget(key);
        } else if (owner !== null) {
          const env: CallEnvelope = { key, op, args, from: this.opts.nodeId, ...(opts.retryOnRestart === undefined ? {} : { retry: opts.retryOnRestart }) };
          if (this.opts.incarnation !== undefined && op.startsWith('stream.')) env.inc = this.opts.incarnation;
          if (at) at.owner = owner;
          const a = await this.forwarder.forward(owner, env);
          if (a.done) {
            if (at && a.epoch !== undefined) at.epoch = a.epoch;
            return a.value;
          }
          // Moved on while the call waited there: to the new owner (known now) at once.
          if (a.late) {
            late = a.late;
            if (!a.silent) continue;
            silent = { owner, epoch: epochOf(this.opts.owners, key, owner) };
            this.opts.owners.forget(key);
          } else {
            this.opts.owners.forget(key);
            // Told where the account went: ask again at once, once; otherwise wait for news.
            if (a.notOwner && !redirected) {
              redirected = true;
              continue;
            }
          }
        }
        // Nobody holds the account's lease: for such a call, nothing left to do (CallOptions).
        if (opts.unownedIsDone && owner === null) return undefined;
        await this.waitForOwner(key, deadline, !waited, keyedTrade(op, args));
        waited = true;
      }
    } catch (err) {
      // The new owner found the old one's claim of this order: the old owner's answer says more.
      if (late && err instanceof ApiError && err.code === 'IDEMPOTENCY_UNCERTAIN') return this.forwarder.lateAnswer(late, err);
      throw err;
    }
  }

  /** No owner to run the call now: waits for news of one (or `recheckMs`), or 503 past the deadline.
   *  `keyed`: a trade with a clientOrderId, which may have reached an owner that went away with it
   *  (to the broker, even): the 503 says to retry with the same id, as an owner's own 503 does. */
  private async waitForOwner(key: string, deadline: number, first: boolean, keyed: boolean): Promise<void> {
    const left = deadline - this.now();
    if (left <= 0) {
      throw this.unavailable(`account ${key} has no reachable owner yet (a node is taking it over); ${keyed ? 'retry with the same clientOrderId: it is answered once, wherever it lands' : 'retry'}`);
    }
    if (first) this.stats.ownerWaits++;
    await this.ownerChange(key, Math.min(left, this.recheckMs));
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
   *  node's sockets; open and subscribe there what they hold, so its events (relayed) reach them
   *  again. Whether it was done. Not done (the owner lookup failing while PostgreSQL restarts, the
   *  owner refusing a node it released as departed, NATS away): done again from a clean slate at
   *  that owner (rejoinAt: forgotten there, then everything held there opened again), until it is
   *  or the account moves on; before, a replay that failed once was never made again, and the
   *  sockets got the account's events but none of their symbols' quotes, or nothing at all. Within
   *  such a resync (`within`), its caller tries again. */
  private async replay(accountId: string, at: At, within = false): Promise<boolean> {
    const { owner } = at;
    const h = this.held.holding(this.opts.nodeId, accountId);
    if (!h) return true;
    this.heldAt.set(accountId, at);
    try {
      for (let i = 0; i < h.opens; i++) await this.route(accountId, 'stream.open', { accountId }, {});
      for (const [symbol, timeframes] of h.symbols) {
        await this.route(accountId, 'stream.sub', { accountId, symbol, timeframes, timeoutMs: this.opts.ownerWaitMs }, {});
      }
      this.stats.streamReplays++;
      return true;
    } catch (err) {
      this.opts.log.warn('could not reopen a stream at the account\'s new owner; trying again', { accountId, owner, err: errorMessage(err) });
      if (!within) void this.rejoinAt(releasedBy(err) ?? owner);
      return false;
    }
  }

  /**
   * A shard of this node died (ShardSet.onDeath; `lost`: the accounts it ran): its new thread holds
   * no stream of them. The owner's ledger drops every node's holds of the accounts owned here and
   * tells the other nodes, which open again what they hold (reopen). This node's own hub let go of
   * its opens of the accounts it numbers (their sockets closed with 4011: opensLost); what it still
   * holds of others owned here (a role not yet the owner's) is opened on the new thread, once every
   * listener of the death ran.
   */
  shardDied(lost: (accountId: string) => boolean): void {
    this.streams.shardDied(lost);
    const me = this.opts.nodeId;
    const mine = [...this.heldAt].filter(([id, at]) => at.owner === me && lost(id)).map(([id]) => id);
    if (mine.length) setImmediate(() => this.reopen(me, mine));
  }

  /** `owner`'s shard running these accounts died (its notice, or this node's own): what this node's
   *  sockets hold of them there is opened and subscribed again, on its new thread (replay: done again
   *  from a clean slate at that owner if it fails). */
  reopen(owner: string, accountIds: readonly string[]): void {
    for (const id of accountIds) {
      const at = this.heldAt.get(id);
      if (at?.owner === owner) void this.replay(id, at);
    }
  }

  /** This node's stream hub let go of its opens of the account without closing them: the shard
   *  running it here died under them (AccountStreams.shardDied). Nothing of them is held any more
   *  (a move reopens none of them elsewhere). An account owned elsewhere: its owner's shard still
   *  holds them, and so does this ledger (what a move reopens). */
  opensLost(accountId: string): void {
    if (this.heldAt.get(accountId)?.owner !== this.opts.nodeId) return;
    this.held.dropAccount(accountId);
    this.heldAt.delete(accountId);
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

  /** Runs a call on this node's shards for `origin` (this node, or the node that forwarded it).
   *  Stream interest goes through the ledger (streamInterest.ts), so nodes' hubs compose. */
  private runHere(origin: string, key: string, op: CommandName, args: unknown, opts: CallOptions): Promise<unknown> {
    // Not a stream command: the shard's own promise (no async layer of this router's in between).
    if (!op.startsWith('stream.')) return this.opts.shards.call(key, op, args as never, opts);
    return this.streams.run(origin, key, op, args, opts);
  }

  /**
   * This node's heartbeat lapsed for a lease or more: the owners may have judged it departed and
   * released what its sockets held (forgetNode), and refuse its stream commands until it asks to be
   * forgotten. Each remote owner is asked to forget it (a no-op if it already did), then this node's
   * holds there are opened again, so the owner's ledger holds exactly them, once, whether or not it
   * had released them. An ask not answered (this node's NATS connection died during the lapse: a
   * nats-server restarted meanwhile; or the owner is gone) is made again until answered, or until
   * nothing this node holds is at that owner any more (the accounts moved: the move reopens them).
   */
  async rejoin(): Promise<void> {
    const me = this.opts.nodeId;
    const owners = new Set<string>();
    for (const at of this.heldAt.values()) if (at.owner !== me && at.owner !== '') owners.add(at.owner);
    await Promise.all([...owners].map((owner) => this.rejoinAt(owner)));
  }

  private async rejoinAt(owner: string): Promise<void> {
    for (let attempt = 0; !this.closed; attempt++) {
      if (![...this.heldAt.values()].some((at) => at.owner === owner)) return;
      try {
        await this.resyncAt(owner);
        return;
      } catch (err) {
        if (attempt % 10 === 0) this.opts.log.warn('could not open again at an owner what this node\'s sockets hold there; trying again', { owner, attempt, err: errorMessage(err) });
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(this.opts.ownerWaitMs, 100 * 2 ** attempt)).unref?.());
    }
  }

  /** Asks `owner` to forget what this node's sockets held there, then opens there again what they
   *  hold; one at a time per owner (a second caller waits for the one under way). Rejects if the
   *  owner does not answer the ask within the owner wait, or a stream could not be opened again. */
  private resyncAt(owner: string): Promise<void> {
    let running = this.resyncs.get(owner);
    if (!running) {
      running = (async () => {
        // This node's own shards (a replay on itself failed): its own ledger, no NATS needed.
        if (owner === this.opts.nodeId) await this.streams.forgetAsked(owner);
        else await this.opts.link.nc.request(SUBJECTS.nodeForget(owner), this.opts.nodeId, { timeout: this.opts.ownerWaitMs });
        let failed = 0;
        for (const [accountId, at] of [...this.heldAt]) if (at.owner === owner && !(await this.replay(accountId, at, true))) failed++;
        if (failed) throw new Error(`${failed} account stream(s) not opened again at ${owner}`);
      })().finally(() => this.resyncs.delete(owner));
      this.resyncs.set(owner, running);
    }
    return running;
  }

  private unavailable(message: string, cause?: unknown): ApiError {
    this.stats.unavailable++;
    return apiError('SERVICE_UNAVAILABLE', message, { headers: { 'retry-after': '1' }, ...(cause === undefined ? {} : { cause }) });
  }

  /** Stops answering forwarded calls (the owner hands its accounts over before this). */
  close(): void {
    this.closed = true;
    this.server.close();
    this.forwarder.close();
    this.offOwners();
  }
}
