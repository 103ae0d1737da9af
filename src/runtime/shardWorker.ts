// Shard worker entry (a Piscina task that lives as long as the shard). Piscina owns the thread's
// lifecycle (spawn, execArgv, resource limits, respawn after a crash); the task itself holds the
// shard's actors and serves commands over the MessagePort it was handed, so requests bypass
// Piscina's task queue and reach the account's actors with one message hop.
import { errorMessage } from '../util/errorMessage.js';
import { apiError, toWire } from '../errors.js';
import { createLogger } from '../log.js';
import { offsetClock } from '../util/clock.js';
import { openDb } from '../store/db.js';
import { CommitGroup } from '../store/commitGroup.js';
import { FULL_DISK_RETRY_MS, FullDisk, type FullDiskEpisode } from '../store/fullDisk.js';
import { requestChunks } from './requestChunks.js';
import type { ActorHost, Handlers, ShardContext } from './hosts/context.js';
import { createAccountHost } from './hosts/accounts.js';
import { createSeatHost } from './hosts/seats.js';
import { createSessionHost } from './hosts/sessions.js';
import { createStreamHost } from './hosts/streams.js';
import './hosts/ownershipCommands.js';
import { startThreadStats, THREAD_STATS_EVENT, THREAD_STATS_MS } from './threadStats.js';
import { STORAGE_EVENT } from './storageEvent.js';
import { shardOf, type MainToShard, type ReplyMsg, type RequestMsg, type ShardEvent, type ShardInit, type ShardToMain } from './protocol.js';

/** Hosts of every actor kind; later features append theirs here. */
const HOST_FACTORIES: Array<(ctx: ShardContext) => ActorHost> = [(ctx) => createAccountHost(ctx), createSeatHost, createStreamHost, createSessionHost];

export default async function runShard(init: ShardInit): Promise<{ stopped: true }> {
  const { port, shard, shards } = init;
  const log = createLogger(init.settings.logLevel, { shard });
  const db = openDb(init.dataDir);

  let replies: ReplyMsg[] = [];
  let events: ShardEvent[] = [];
  let flushQueued = false;
  const flush = () => {
    flushQueued = false;
    if (replies.length) {
      const msg: ShardToMain = { t: 'rep', batch: replies };
      replies = [];
      port.postMessage(msg);
    }
    if (events.length) {
      const msg: ShardToMain = { t: 'ev', batch: events };
      events = [];
      port.postMessage(msg);
    }
  };
  const queueFlush = () => {
    if (!flushQueued) {
      flushQueued = true;
      queueMicrotask(flush);
    }
  };
  // The shard's full-disk episodes, to the main thread (runtime/storageEvent.ts).
  const reportStorage = (data: FullDiskEpisode) => {
    events.push({ kind: STORAGE_EVENT, key: String(shard), data });
    queueFlush();
  };

  // Cluster mode: the accounts whose leases this node holds; they change by shard.adopt / shard.release.
  const owned = init.owned === undefined ? undefined : new Set(init.owned);
  const commitGroup = new CommitGroup();
  // Fail-stop: set when the simulator's store failed a commit (its memory is then ahead of the
  // disk); the shard answers nothing more from that memory and ends, and its supervisor restarts it.
  let failed: unknown;
  let end: ((err: unknown) => void) | undefined;
  const ctx: ShardContext = {
    commitGroup,
    fatal: (err) => {
      if (failed !== undefined) return;
      failed = err;
      log.error('simulator store: a commit failed; the shard stops and restarts from what is on disk', { err: errorMessage(err) });
      // After this turn: the failed commit's waiters are answered first.
      setImmediate(() => end?.(err));
    },
    shard, shards, db, log, settings: init.settings, clock: offsetClock(init.settings.clockOffsetMs ?? 0),
    // SIM_START: the simulator and what is compared with its times run on the offset kept in DATA_DIR.
    marketClock: offsetClock((init.settings.clockOffsetMs ?? 0) + (init.settings.simClockOffsetMs ?? 0)),
    // One for the shard's background writes (the simulator's, a seat's): one log line per episode.
    fullDisk: new FullDisk({ log, retryMs: init.settings.timing.storageRetryMs ?? FULL_DISK_RETRY_MS, report: reportStorage }),
    emit(ev) {
      events.push(ev);
      queueFlush();
    },
    owns: owned === undefined ? (key) => shardOf(key, shards) === shard : (key) => owned.has(key) && shardOf(key, shards) === shard,
    leased: owned !== undefined,
  };
  const hosts = HOST_FACTORIES.map((f) => f(ctx));
  const stats = startThreadStats();
  const postStats = () => ctx.emit({ kind: THREAD_STATS_EVENT, key: String(shard), data: stats.snapshot() });
  const statsTimer = setInterval(postStats, THREAD_STATS_MS);
  statsTimer.unref();
  const handlers: Handlers = Object.assign({}, ...hosts.map((h) => h.handlers)) as Handlers;
  handlers['shard.ping'] = () => ({ shard, actors: hosts.reduce((n, h) => n + h.actorCount(), 0), pid: process.pid });
  // The hosts' rehydrate() starts what the shard owns and is not running yet, so adopting is
  // widening owns() and rehydrating again.
  handlers['shard.adopt'] = ({ accountIds }) => {
    if (!owned) return { started: 0 };
    for (const id of accountIds) owned.add(id);
    return { started: hosts.reduce((n, h) => n + h.rehydrate(), 0) };
  };
  handlers['shard.release'] = ({ accountIds }) => {
    if (!owned) return { stopped: 0 };
    const ids = new Set(accountIds);
    for (const id of ids) owned.delete(id);
    return { stopped: hosts.reduce((n, h) => n + (h.release?.(ids) ?? 0), 0) };
  };

  const rehydrated = hosts.reduce((n, h) => n + h.rehydrate(), 0);
  log.info('shard started', { rehydrated });
  postStats(); // the first snapshot at once: /metrics has every thread from the start
  reportStorage({ waiting: false }); // nothing waits in a fresh shard (a restart ends its last run's episode)

  const reply = (r: ReplyMsg) => {
    replies.push(r);
    queueFlush();
  };
  const handle = (req: RequestMsg) => {
    if (failed !== undefined) {
      reply({ id: req.id, ok: false, error: toWire(RESTARTING) });
      return;
    }
    const fn = handlers[req.op] as ((a: unknown) => unknown) | undefined;
    if (!fn) {
      reply({ id: req.id, ok: false, error: { code: 'INTERNAL_ERROR', message: `unknown shard command ${req.op}` } });
      return;
    }
    try {
      const out = fn(req.args);
      if (out instanceof Promise) {
        out.then(
          (result) => reply({ id: req.id, ok: true, result }),
          (err: unknown) => fail(req, err),
        );
      } else {
        reply({ id: req.id, ok: true, result: out });
      }
    } catch (err) {
      fail(req, err);
    }
  };
  // An unexpected error reaches the main thread as a bare INTERNAL_ERROR (no detail crosses the
  // wire), so its cause is logged here, where it happened.
  const fail = (req: RequestMsg, err: unknown) => {
    const wire = toWire(err);
    if (wire.code === 'INTERNAL_ERROR') log.error('shard command failed', { op: req.op, err: errorMessage(err) });
    reply({ id: req.id, ok: false, error: wire });
  };

  const chunks = requestChunks(commitGroup, handle);
  const shutdown = () => {
    chunks.drain();
    for (const h of hosts) h.stop();
    clearInterval(statsTimer);
    stats.stop();
    flush();
    db.close();
    port.close();
  };
  return new Promise((resolve, reject) => {
    end = (err) => {
      try {
        shutdown();
      } finally {
        reject(new Error(`simulator store failed a commit: ${errorMessage(err)}`));
      }
    };
    port.on('message', (msg: MainToShard) => {
      if (msg.t === 'req') {
        // Several requests at once (the main thread sends a turn's calls together under load):
        // in chunks, each chunk's bookings in one commit and its replies in one message.
        chunks.run(msg.batch);
      } else if (msg.t === 'stop') {
        if (failed !== undefined) return; // ending already
        shutdown();
        resolve({ stopped: true });
      }
    });
    const ready: ShardToMain = { t: 'ready', actors: rehydrated };
    port.postMessage(ready);
  });
}

/** The answer to requests reaching a shard that is ending after a failed commit. */
const RESTARTING = apiError('SERVICE_UNAVAILABLE', 'the account runtime is restarting after a failed write; retry', { headers: { 'retry-after': '1' } });
