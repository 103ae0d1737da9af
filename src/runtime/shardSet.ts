// Main-thread side of the shards: routing (key -> shard), request/reply correlation, batching,
// and supervision. Each shard is a one-thread Piscina pool running one long-lived host task; when
// its thread dies the task rejects, Piscina spawns a fresh thread, and the supervisor starts the
// host task again, which rehydrates the shard's actors from SQLite. Requests made meanwhile wait.
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { apiError, fromWire } from '../errors.js';
import type { Logger } from '../log.js';
import { errorMessage } from '../util/errorMessage.js';
import { KeyedTable } from '../util/keyedTable.js';
import type { ShardSettings } from './settings.js';
import {
  shardOf, type ArgsOf, type CommandName, type MainToShard, type RequestMsg, type ResultOf,
  type ShardEvent, type ShardInit, type ShardToMain,
} from './protocol.js';

export interface ShardSetOptions {
  shards: number;
  dataDir: string;
  settings: ShardSettings;
  log: Logger;
  onEvent?: (ev: ShardEvent) => void;
  /** Per-call timeout (ms). */
  callTimeoutMs?: number;
  /** Each answered command: its shard and round trip in seconds, queueing included (/metrics). */
  onRoundTrip?: (shard: number, seconds: number) => void;
  /** A compiled shardWorker.js to run instead of this module's sibling (the tests point it at their
   *  build: a worker loading the sources through tsx spends several times the CPU starting). */
  workerFile?: string;
  /** Cluster mode: the accounts this node holds leases for, asked at every (re)start of a shard,
   *  which then runs only those (and those adopted later). Absent: every account of the shard. */
  ownedKeys?: () => string[];
}

export interface CallOptions {
  /** Re-send after a shard restart when the shard died before replying. Off for non-idempotent commands. */
  retryOnRestart?: boolean;
  /** Cluster mode: a call that only stops what an owner runs (a removed seat's account). With no
   *  node holding the account's lease, nothing runs it (its release stopped it on its last owner, and
   *  no node takes an account that no longer exists): resolves undefined then, instead of waiting for
   *  an owner that will not come and answering 503. An owner handing it over is waited for as usual.
   *  One node's shards always run the call. */
  unownedIsDone?: boolean;
}

interface Pending {
  op: CommandName;
  args: unknown;
  retry: boolean;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  /** performance.now() when the command was made (its deadline: this + the call timeout). */
  sentAt: number;
}

// Running from TypeScript sources (tests, tsx): the worker must load the .ts file through tsx.
const selfUrl = import.meta.url;
const fromSource = selfUrl.endsWith('.ts');
/** Starts of a shard that never reported ready before the start fails. */
const START_ATTEMPTS = 3;
const workerFile = fileURLToPath(new URL(fromSource ? './shardWorker.ts' : './shardWorker.js', selfUrl));

/**
 * The executor of every call's promise: the Promise constructor runs it at once, and call() takes
 * the two functions from here. An executor closure per call captured the call's arguments, a
 * function and a context per order.
 */
let takenResolve: ((v: unknown) => void) | undefined;
let takenReject: ((e: unknown) => void) | undefined;
function takeSettlers(resolve: (v: unknown) => void, reject: (e: unknown) => void): void {
  takenResolve = resolve;
  takenReject = reject;
}

class Shard {
  private readonly pool: Piscina;
  private port: MessagePort | null = null;
  private nextId = 1;
  /** Not a Map: see KeyedTable (under load a Map here promoted ~1.8 MB of finished calls per scavenge). */
  private readonly pending = new KeyedTable<number, Pending>(true);
  /** One timer for every call's deadline, armed for the oldest call's (see expire): no timer per call. */
  private deadlineTimer: NodeJS.Timeout | undefined;
  private outbox: RequestMsg[] = [];
  private flushQueued = false;
  private closing = false;
  private readyWaiters: Array<{ resolve: () => void; reject: (e: Error) => void }> = [];
  ready = false;
  /** It reported ready once: a crash after that is restarted for as long as it takes. */
  private started = false;
  restarts = 0;
  private crashStreak = 0;

  get queueDepth(): number {
    return this.pending.size;
  }

  /** `announce`: the thread died after the shard was up ('died', see ShardSet.onDeath), or a
   *  restarted thread reported ready ('up', see ShardSet.onRestart). */
  constructor(readonly index: number, private readonly opts: ShardSetOptions, private readonly announce: (what: 'died' | 'up') => void) {
    this.pool = new Piscina({
      filename: opts.workerFile ?? workerFile,
      minThreads: 1,
      maxThreads: 1,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      // The host task is long-lived and async: the worker must run its event loop, not spin in Atomics.wait.
      atomics: 'disabled',
      execArgv: fromSource && opts.workerFile === undefined ? ['--import', 'tsx'] : [],
    });
  }

  start(): Promise<void> {
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    port1.on('message', (m: ShardToMain) => this.onMessage(m));
    const init: ShardInit = {
      shard: this.index, shards: this.opts.shards, dataDir: this.opts.dataDir, settings: this.opts.settings, port: port2,
      ...(this.opts.ownedKeys ? { owned: this.opts.ownedKeys() } : {}),
    };
    this.pool.run(init, { transferList: [port2] as never }).then(
      () => this.onExit(null),
      (err: unknown) => this.onExit(err),
    );
    return new Promise((resolve, reject) => this.readyWaiters.push({ resolve, reject }));
  }

  private onMessage(m: ShardToMain): void {
    if (m.t === 'rep') {
      for (const r of m.batch) {
        const p = this.pending.get(r.id);
        if (!p) continue;
        this.pending.delete(r.id);
        this.opts.onRoundTrip?.(this.index, (performance.now() - p.sentAt) / 1000);
        if (r.ok) p.resolve(r.result);
        else p.reject(fromWire(r.error));
      }
    } else if (m.t === 'ev') {
      if (this.opts.onEvent) for (const ev of m.batch) this.opts.onEvent(ev);
    } else if (m.t === 'ready') {
      const restarted = this.started;
      this.ready = true;
      this.crashStreak = 0;
      this.started = true;
      const w = this.readyWaiters;
      this.readyWaiters = [];
      for (const f of w) f.resolve();
      this.queueFlush();
      if (restarted) this.announce('up');
    }
  }

  private onExit(err: unknown): void {
    this.ready = false;
    this.port?.close();
    this.port = null;
    if (this.closing) return;
    // The thread died (or the task ended unexpectedly): replies to what was sent are lost.
    this.restarts++;
    this.crashStreak++;
    if (!this.started && this.crashStreak >= START_ATTEMPTS) {
      // It never came up: the start fails with the worker's reason (a database it may not write,
      // say). Restarting it for ever left a start that never ended, or a process that exited 0.
      const waiters = this.readyWaiters.splice(0);
      const failure = new Error(`shard ${this.index} could not start (${this.crashStreak} attempts): ${errorMessage(err)}`);
      for (const w of waiters) w.reject(failure);
      return;
    }
    this.opts.log.error('shard died; restarting', { shard: this.index, err: errorMessage(err), restarts: this.restarts });
    // What the new thread gets is made again from the calls still waiting, once each: what was not
    // flushed yet is among them. Before, the outbox kept it and the calls were queued again behind it:
    // each start that failed (a crash loop) sent every waiting call once more, and a call refused
    // here (a trade, told to retry) was still sent, and run, when a thread came up.
    this.outbox = [];
    for (const [id, p] of this.pending) {
      if (p.op === 'stream.close') {
        // It lets go of a stream.open the dead thread answered (a close is sent only after its open
        // is answered): nothing is left to let go of. Sent again, the new thread would count it
        // against an open it holds (a reconnect's), and drop that stream under its socket.
        this.pending.delete(id);
        p.resolve({ ok: true });
      } else if (p.retry) {
        this.outbox.push({ id, op: p.op, args: p.args });
      } else {
        this.pending.delete(id);
        p.reject(apiError('SERVICE_UNAVAILABLE', 'the account runtime restarted before replying; retry', { headers: { 'retry-after': '1' } }));
      }
    }
    // After the calls in flight are queued again: what the listeners send now is queued once.
    if (this.started) this.announce('died');
    // Back off only when crash-looping, so a single crash is repaired at once.
    const delay = this.crashStreak <= 1 ? 0 : Math.min(5_000, 100 * 2 ** (this.crashStreak - 2));
    // A start that fails for good rejects the first start()'s promise too, which reports it.
    setTimeout(() => void this.start().catch(() => {}), delay).unref();
  }

  call(op: CommandName, args: unknown, retry: boolean): Promise<unknown> {
    if (this.closing) return Promise.reject(apiError('SERVICE_UNAVAILABLE', 'server is shutting down'));
    const promise = new Promise<unknown>(takeSettlers);
    const id = this.nextId++;
    this.pending.set(id, { op, args, retry, resolve: takenResolve!, reject: takenReject!, sentAt: performance.now() });
    takenResolve = takenReject = undefined;
    if (this.deadlineTimer === undefined) this.armDeadline(this.timeoutMs);
    this.outbox.push({ id, op, args });
    this.queueFlush();
    return promise;
  }

  private get timeoutMs(): number {
    return this.opts.callTimeoutMs ?? 30_000;
  }

  private armDeadline(ms: number): void {
    this.deadlineTimer = setTimeout(this.expire, ms);
    this.deadlineTimer.unref();
  }

  /**
   * Rejects the calls past their deadline and re-arms for the oldest one left. A timer per call
   * cost each order a Timeout object and two timer-list updates; calls take milliseconds, so this
   * one fires about once per timeout period and finds nothing due.
   */
  private readonly expire = (): void => {
    this.deadlineTimer = undefined;
    const now = performance.now();
    const timeout = this.timeoutMs;
    let oldest = Infinity;
    for (const [id, p] of this.pending) {
      if (now - p.sentAt >= timeout) {
        this.pending.delete(id);
        p.reject(apiError('SERVICE_UNAVAILABLE', `account runtime did not answer ${p.op} in time`));
      } else if (p.sentAt < oldest) {
        oldest = p.sentAt;
      }
    }
    // Expired while no thread was ready to take them: they are never sent (the caller was told 503).
    if (!this.ready) this.outbox = this.outbox.filter((r) => this.pending.has(r.id));
    if (oldest !== Infinity && !this.closing) this.armDeadline(Math.max(1, oldest + timeout - now));
  };

  private queueFlush(): void {
    if (this.flushQueued || !this.ready) return;
    this.flushQueued = true;
    // A lone call leaves at once (a microtask). With others in flight, the shard is busy anyway:
    // the calls of this turn gather and leave together at its end (setImmediate, after uWS's
    // callbacks and the requests they started), one message and one shard wake-up for all, whose
    // bookings then share a commit (src/store/commitGroup.ts).
    if (this.pending.size <= 1) queueMicrotask(this.flush);
    else setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.flushQueued = false;
    if (!this.port || !this.ready || this.outbox.length === 0) return;
    const msg: MainToShard = { t: 'req', batch: this.outbox };
    this.outbox = [];
    this.port.postMessage(msg);
  };

  /** Kills the worker thread abruptly (operations and tests of the supervisor). */
  async kill(): Promise<void> {
    const t = this.pool.threads[0];
    if (t) await t.terminate();
  }

  threadId(): number | undefined {
    return this.pool.threads[0]?.threadId;
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.port && this.ready) {
      const done = new Promise<void>((r) => this.port!.once('close', () => r()));
      const stop: MainToShard = { t: 'stop' };
      this.port.postMessage(stop);
      await Promise.race([done, new Promise((r) => setTimeout(r, 5_000).unref())]);
    }
    clearTimeout(this.deadlineTimer);
    for (const [, p] of this.pending) p.reject(apiError('SERVICE_UNAVAILABLE', 'server is shutting down'));
    this.pending.clear();
    await this.pool.destroy();
  }
}

/** What routes and the stream hub use of the shards: a ShardSet, or in cluster mode the node's
 *  router in front of it (`call` reaches the account's owner; the rest stays on this node). */
export type Shards = Pick<ShardSet, 'call' | 'callShard' | 'shardFor' | 'size' | 'allReady' | 'restarts' | 'onDeath' | 'onRestart' | 'queueDepths' | 'health' | 'kill' | 'threadId'> & {
  /** The caller (the stream hub) let go of its stream.opens of the account without closing them: the
   *  shard's thread died under them. Cluster mode: the router forgets them, and so does the node's
   *  StreamFollower (its relay subscriptions for them go); on one node the new thread simply holds none. */
  opensLost?(key: string): void;
};

export class ShardSet {
  private readonly shards: Shard[];
  private readonly listeners = { died: new Set<(shard: number) => void>(), up: new Set<(shard: number) => void>() };

  constructor(private readonly opts: ShardSetOptions) {
    this.shards = Array.from({ length: opts.shards }, (_, i) => new Shard(i, opts, (what) => this.announce(what, i)));
  }

  get size(): number {
    return this.shards.length;
  }

  async start(): Promise<void> {
    await Promise.all(this.shards.map((s) => s.start()));
  }

  shardFor(key: string): number {
    return shardOf(key, this.shards.length);
  }

  /** With `unownedIsDone`: undefined in cluster mode when no node owns the account (CallOptions). */
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts: CallOptions & { unownedIsDone: true }): Promise<ResultOf<C> | undefined>;
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts?: CallOptions): Promise<ResultOf<C>>;
  call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, opts: CallOptions = {}): Promise<ResultOf<C>> {
    return this.callShard(this.shardFor(key), op, args, opts);
  }

  callShard<C extends CommandName>(shard: number, op: C, args: ArgsOf<C>, opts: CallOptions = {}): Promise<ResultOf<C>> {
    return this.shards[shard]!.call(op, args, opts.retryOnRestart ?? true) as Promise<ResultOf<C>>;
  }

  allReady(): boolean {
    return this.shards.every((s) => s.ready);
  }

  /** Deaths of shard threads (counted when one dies; /metrics, /healthz). */
  restarts(): number {
    return this.shards.reduce((n, s) => n + s.restarts, 0);
  }

  /** `listener` runs each time the thread of a shard that was up dies (a crash, a kill), before its
   *  restart: what it held in memory (stream state, subscriptions, events not yet sent) is gone, and
   *  nothing says when a new thread will be ready (one that crashes while it rehydrates is started
   *  again with backoff, maybe for ever). Once per death, from the shard's first ready on: in a
   *  crash loop every start that crashes is one. Returns the unsubscribe. */
  onDeath(listener: (shard: number) => void): () => void {
    return this.listen('died', listener);
  }

  /** `listener` runs each time a shard that died is up again: its new thread reported ready, takes
   *  commands and holds nothing of the old one's memory (stream state, subscriptions); once per
   *  return, however many starts it took. A first start is not one. Returns the unsubscribe. */
  onRestart(listener: (shard: number) => void): () => void {
    return this.listen('up', listener);
  }

  private listen(what: 'died' | 'up', listener: (shard: number) => void): () => void {
    this.listeners[what].add(listener);
    return () => void this.listeners[what].delete(listener);
  }

  private announce(what: 'died' | 'up', shard: number): void {
    for (const l of [...this.listeners[what]]) {
      try {
        l(shard);
      } catch (err) {
        this.opts.log.error(`shard ${what === 'died' ? 'death' : 'restart'} listener failed`, { shard, err: errorMessage(err) });
      }
    }
  }

  /** Commands sent to each shard and not answered yet. */
  queueDepths(): number[] {
    return this.shards.map((s) => s.queueDepth);
  }

  /** Each shard: up (ready for commands) and how often it was restarted. */
  health(): Array<{ index: number; ready: boolean; restarts: number }> {
    return this.shards.map((s) => ({ index: s.index, ready: s.ready, restarts: s.restarts }));
  }

  kill(shard: number): Promise<void> {
    return this.shards[shard]!.kill();
  }

  threadId(shard: number): number | undefined {
    return this.shards[shard]!.threadId();
  }

  async close(): Promise<void> {
    await Promise.all(this.shards.map((s) => s.close()));
  }
}
