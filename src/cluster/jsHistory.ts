// The account stream's history in JetStream (cluster mode, docs/cluster.md "Streams and resume"):
// the owner of an account writes each numbered frame (epoch, seq: the same bytes its sockets get)
// to the stream TAGW_HISTORY on `tagw.hist.<account>`; a client resuming on any node is replayed
// from here, and a new owner after a takeover reads the last number to continue the epoch. The
// limits are the single node's history settings (max age, max messages per account), file storage,
// so the history outlives any node. Works with nats-server 2.9 (direct get with next_by_subj and
// last_by_subj; no batch get, which needs 2.11).
import { DeliverPolicy, jetstream, JetStreamApiCodes, JetStreamApiError, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager, type StoredMsg, type StreamConfig } from '@nats-io/jetstream';
import { headers, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import type { DealMark } from '../store/streamHistory.js';
import { LeaseOrder, ReplayTaker, type LeasedMessage } from './leaseOrder.js';
import { StreamReplicasError } from './streamReplicasError.js';
import { token } from './subjects.js';

// The shapes of stream/history.ts (the edge layer, above this one), restated: structurally the same.
export interface StreamPosition { epoch: string; seq: number }
export interface HistoryEntry { seq: number; at: number; frame: string }
export interface HistoryLimits { maxEvents: number; maxAgeMs: number }
export type Replay = { recovered: true; entries: HistoryEntry[]; lease?: number } | { recovered: false };

export const HISTORY_STREAM = 'TAGW_HISTORY';
export const historySubject = (accountId: string): string => `tagw.hist.${token(accountId)}`;
/** Where each takeover's fence is noted again (its lease, where it was stored): one read tells a
 *  head written by an earlier owner after a later one's fence. Under `tagw.hist.*` (the stream's
 *  subjects as every version sets them); `~f` is no token of an account id (subjects.ts writes a
 *  '~' before two upper-case hex digits only). */
export const fenceSubject = (accountId: string): string => `tagw.hist.${token(accountId)}~f`;

const H_EPOCH = 'Tagw-Epoch';
const H_SEQ = 'Tagw-Seq';
const H_DEAL = 'Tagw-Deal';
/** The writer's lease epoch (leaseOrder.ts). */
export const H_LEASE = 'Tagw-Lease';
/** On a takeover's fence (no frame: it restates the head the new owner continues). */
export const H_FENCE = 'Tagw-Fence';
/** On a fence: the lease of the head it restates. */
const H_HEAD_LEASE = 'Tagw-Head-Lease';
/** On a fence's note (fenceSubject): the stream sequence of the fence. */
const H_AT = 'Tagw-At';
/** On an epoch's start marker: why the owner began it ('rebound': the account was bound to another login). */
export const H_WHY = 'Tagw-Why';

/** One numbered frame as the owner writes it (seq 0 with an empty frame: an epoch's start).
 *  `lease`: the lease epoch under which its owner took the account's role (absent: none, a
 *  follower starting the account's first epoch). */
export interface NumberedFrame { epoch: string; seq: number; frame: string; deal: DealMark; why?: 'rebound'; lease?: number; fence?: boolean; headLease?: number }

/** Where an account's stream stands in JetStream: what a new owner continues from; `frame`: the
 *  last stored message's frame (empty for an epoch's start marker or a fence). `lease`: its
 *  writer's (0: none said); `last`: the stream sequence of the account's last stored message (a
 *  later one than the head's when an earlier owner's write landed after the last fence). */
export interface HistoryHead extends StreamPosition {
  deal: DealMark; at: number; frame: string; why?: 'rebound'; lease: number;
  /** The head is a takeover's fence (it restates the position its owner continues from). */
  fence?: boolean;
  /** The lease of the frame at the head's seq (a fence's: of the head it restated). */
  frameLease: number;
  /** The stream sequence of the head's message. */
  stored: number;
  last: number;
}

export interface JetStreamHistoryOptions {
  nc: NatsConnection;
  limits: HistoryLimits;
  /** Stream replicas (1 on a single nats-server; 3 on a JetStream cluster). */
  replicas?: number;
  /** How long a publish waits for the stream's ack (ms). */
  ackTimeoutMs?: number;
  /** Where a change of the stream's replicas by this node's start is said. */
  log?: Pick<Logger, 'warn'>;
}

/** How long a replay waits for JetStream to make its consumer (ms; it takes a few when healthy). */
const CONSUMER_WAIT_MS = 1_000;

/** JetStream's refusals of a replica count: no suitable peers for placement (more replicas than
 *  servers), insufficient resources, replicas > 1 on a server not in a cluster. */
const REPLICA_REFUSALS = new Set([10005, 10023, 10074]);

interface Parsed extends LeasedMessage { deal: DealMark; stored: StoredMsg }

/** A stored message's number, lease and kind from its headers (null: not one of ours). */
export function leasedOf(h: MsgHdrs | undefined): LeasedMessage | null {
  const epoch = h?.get(H_EPOCH);
  const seq = Number(h?.get(H_SEQ));
  if (!epoch || !Number.isSafeInteger(seq)) return null;
  const lease = Number(h!.get(H_LEASE) || NaN);
  const fence = h!.get(H_FENCE) ? { fence: true, headLease: Number(h!.get(H_HEAD_LEASE) || 0) } : {};
  return { epoch, seq, ...(Number.isSafeInteger(lease) ? { lease } : {}), ...fence };
}

function parse(m: StoredMsg): Parsed | null {
  const l = leasedOf(m.header);
  if (!l) return null;
  const [ticket, timeMsc] = (m.header.get(H_DEAL) || '0:0').split(':').map(Number);
  return { ...l, deal: { ticket: ticket ?? 0, timeMsc: timeMsc ?? 0 }, stored: m };
}

/** A stored frame's headers: its number, the deal mark a next owner continues from, its owner's lease. */
function frameHeaders(f: NumberedFrame): MsgHdrs {
  const h = headers();
  h.set(H_EPOCH, f.epoch);
  h.set(H_SEQ, String(f.seq));
  h.set(H_DEAL, `${f.deal.ticket}:${f.deal.timeMsc}`);
  if (f.why) h.set(H_WHY, f.why);
  if (f.lease !== undefined) h.set(H_LEASE, String(f.lease));
  if (f.fence) {
    h.set(H_FENCE, '1');
    h.set(H_HEAD_LEASE, String(f.headLease ?? 0));
  }
  return h;
}

/** A frame's msg id: a retried publish of it is a duplicate; another owner's frame of the same
 *  number is not (its lease differs), so a write of an earlier owner stored first cannot make the
 *  new owner's frame a "duplicate" answered as stored without being stored. */
const msgIdOf = (accountId: string, f: NumberedFrame): string => `${accountId}:${f.epoch}:${f.seq}${f.lease === undefined ? '' : `:${f.lease}`}`;

export class JetStreamHistory {
  /** Makes the replays' consumers: a bound on their creation, past which a replay reads by direct gets. */
  private readonly reader: JetStreamClient;

  private constructor(
    private readonly js: JetStreamClient, private readonly jsm: JetStreamManager,
    private readonly opts: JetStreamHistoryOptions,
  ) {
    this.reader = jetstream(opts.nc, { timeout: CONSUMER_WAIT_MS });
  }

  /** Creates the stream, or updates its limits to this node's settings (the last node to start wins). */
  static async open(opts: JetStreamHistoryOptions): Promise<JetStreamHistory> {
    const replicas = opts.replicas ?? 1;
    // A lone nats-server refuses more than one replica when the stream is made, but takes it on an
    // update of one that exists and keeps its one copy (2.9): refused here alike.
    if (replicas > 1 && !opts.nc.info?.cluster) throw new StreamReplicasError(replicas, HISTORY_STREAM, 'the NATS server is not in a cluster');
    const jsm = await jetstreamManager(opts.nc);
    const config = {
      name: HISTORY_STREAM,
      subjects: ['tagw.hist.*'],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      max_msgs_per_subject: opts.limits.maxEvents + 1, // + the epoch's start marker
      max_age: opts.limits.maxAgeMs * 1_000_000, // nanoseconds
      num_replicas: replicas,
      allow_direct: true,
      // Msg ids (account, epoch, seq) make a retried publish harmless within this window.
      duplicate_window: Math.min(opts.limits.maxAgeMs, 120_000) * 1_000_000,
    };
    try {
      const before = await ensureStream(jsm.streams, config);
      const change = replicasChange(before?.num_replicas, replicas);
      if (change) opts.log?.warn(change, { stream: HISTORY_STREAM, before: before?.num_replicas, now: replicas });
    } catch (err) {
      if (err instanceof JetStreamApiError && REPLICA_REFUSALS.has(err.code)) throw new StreamReplicasError(replicas, HISTORY_STREAM, err.message);
      throw err;
    }
    return new JetStreamHistory(jetstream(opts.nc), jsm, opts);
  }

  /**
   * Writes the frames (in order, pipelined) and resolves once the stream stored every one: only then
   * may they be sent to sockets, so no client is ever ahead of what any node can replay.
   */
  async append(accountId: string, frames: readonly NumberedFrame[]): Promise<void> {
    const subject = historySubject(accountId);
    const timeout = this.opts.ackTimeoutMs ?? 5_000;
    await Promise.all(frames.map((f) => {
      return this.js.publish(subject, f.frame, { headers: frameHeaders(f), msgID: msgIdOf(accountId, f), timeout });
    }));
  }

  /**
   * Stores `frame` again under a msg id of its own (`again` tells it from the first), so that it is
   * the account's last stored message: after a retried store put lower seqs after it (a publish lost
   * in a reconnect while later ones went through), head() and a new owner's numbering read it again,
   * not a lower seq. Readers skip it as a seq they have (AccountFeed, replay's count).
   */
  async republish(accountId: string, frame: NumberedFrame, again: string): Promise<void> {
    await this.js.publish(historySubject(accountId), frame.frame, { headers: frameHeaders(frame), msgID: `${msgIdOf(accountId, frame)}:again:${again}`, timeout: this.opts.ackTimeoutMs ?? 5_000 });
  }

  /** An epoch begins (seq 0, no frame): resumers at `<epoch>:0` recover, a new owner continues it;
   *  followers end their sockets with the code `why` calls for. */
  startEpoch(accountId: string, epoch: string, deal: DealMark, why?: 'rebound', lease?: number): Promise<void> {
    return this.append(accountId, [{ epoch, seq: 0, frame: '', deal, ...(why ? { why } : {}), ...(lease === undefined ? {} : { lease }) }]);
  }

  /** Starts `epoch` only if the account has no message at all (one atomic publish: of nodes that
   *  race to start one, one wins); false when another was there. With `lease` (an owner's) the
   *  marker is that owner's fence too (noted as one: fenceSubject). */
  async startFirstEpoch(accountId: string, epoch: string, deal: DealMark, lease?: number): Promise<boolean> {
    return this.writeIf(accountId, { epoch, seq: 0, frame: '', deal, ...(lease === undefined ? {} : { lease }) }, 0);
  }

  /**
   * A new owner's fence (`lease`, its lease epoch): a marker restating `head`, stored only if the
   * account's last stored message is still the one at stream sequence `head.last` (false: another
   * was stored since, an earlier owner's write that was on its way: read the head again). Then
   * noted on fenceSubject, so a head read tells an earlier owner's write stored after it.
   */
  fence(accountId: string, head: HistoryHead, lease: number): Promise<boolean> {
    return this.writeIf(accountId, { epoch: head.epoch, seq: head.seq, frame: '', deal: head.deal, lease, fence: true, headLease: head.frameLease }, head.last);
  }

  private async writeIf(accountId: string, f: NumberedFrame, last: number): Promise<boolean> {
    const timeout = this.opts.ackTimeoutMs ?? 5_000;
    let at: number;
    try {
      at = (await this.js.publish(historySubject(accountId), '', { headers: frameHeaders(f), expect: { lastSubjectSequence: last }, timeout })).seq;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return false;
      throw err;
    }
    if (f.lease !== undefined) {
      const h = headers();
      h.set(H_LEASE, String(f.lease));
      h.set(H_AT, String(at));
      await this.js.publish(fenceSubject(accountId), '', { headers: h, timeout });
    }
    return true;
  }

  /**
   * The account's latest number in JetStream (undefined: nothing kept, e.g. all of it aged out):
   * its last stored message, unless that was written by an earlier owner than the last fence's
   * (stored after it): then the last message from the fence on that counts (leaseOrder.ts).
   */
  async head(accountId: string): Promise<HistoryHead | undefined> {
    const subject = historySubject(accountId);
    const [m, f] = await Promise.all([
      this.jsm.direct.getMessage(HISTORY_STREAM, { last_by_subj: subject }),
      this.jsm.direct.getMessage(HISTORY_STREAM, { last_by_subj: fenceSubject(accountId) }),
    ]);
    const p = m && parse(m);
    if (!p) return undefined;
    const fenced = Number(f?.header?.get(H_LEASE) || 0);
    let h = p;
    if (p.lease !== undefined && p.lease < fenced) {
      // Stored after the fence by an earlier owner: the last message from the fence on that counts.
      const order = new LeaseOrder();
      for (let at = Number(f!.header.get(H_AT)); at <= m.seq;) {
        const n = await this.jsm.direct.getMessage(HISTORY_STREAM, { seq: at, next_by_subj: subject });
        if (!n || n.seq > m.seq) break;
        at = n.seq + 1;
        const q = parse(n);
        if (q && order.meet(q) !== 'stale' && (q.lease ?? 0) >= fenced) h = q;
      }
      if (h === p) return undefined; // the fence itself aged out meanwhile: nothing to continue
    }
    const s = h.stored;
    return {
      epoch: h.epoch, seq: h.seq, deal: h.deal, at: s.time.getTime(), frame: s.string(), lease: h.lease ?? 0, stored: s.seq, last: m.seq,
      ...(h.fence ? { fence: true } : {}), frameLease: (h.fence ? h.headLease : h.lease) ?? 0,
      ...(s.header.get(H_WHY) === 'rebound' ? { why: 'rebound' as const } : {}),
    };
  }

  /**
   * Everything after `since`, if JetStream still holds all of it (same epoch, nothing after it
   * expired). The first frame after `since` is found by bisecting stream sequences with direct gets
   * (the account's messages are a subsequence of the stream, the epoch's ascend), then read with an
   * ordered consumer from there up to the head, in the lease order (leaseOrder.ts: an earlier
   * owner's write stored after a later owner's fence is skipped). `lease`: the highest lease met.
   */
  async replay(accountId: string, since: StreamPosition): Promise<Replay> {
    const subject = historySubject(accountId);
    const head = await this.head(accountId);
    if (!head || head.epoch !== since.epoch || since.seq > head.seq) return { recovered: false };
    if (head.seq === since.seq) return { recovered: true, entries: [], ...(head.lease ? { lease: head.lease } : {}) };
    const after = (p: Parsed | null) => p !== null && p.epoch === since.epoch && p.seq > since.seq;
    // Smallest stream seq x whose next account message is after `since` (head's is: hi holds).
    let lo = 1;
    let hi = head.stored;
    let first = { seq: head.seq, stored: head.stored };
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const m = await this.jsm.direct.getMessage(HISTORY_STREAM, { seq: mid, next_by_subj: subject });
      const p = m && parse(m);
      if (after(p)) {
        first = { seq: p!.seq, stored: p!.stored.seq };
        hi = Math.min(mid, p!.stored.seq);
      } else lo = Math.max(mid + 1, (p?.stored.seq ?? mid) + 1);
    }
    if (first.seq !== since.seq + 1) return { recovered: false }; // frames after `since` aged out
    const taker = await this.read(subject, first.stored, head.stored, () => new ReplayTaker(since.epoch, since.seq));
    return taker.wholeTo(head.seq) ? { recovered: true, entries: taker.out, ...(taker.lease ? { lease: taker.lease } : {}) } : { recovered: false };
  }

  /**
   * The messages of `subject` from stream seq `start` to `end` into `taker`: with an ordered
   * consumer (batches), else by direct gets. A consumer is one replica's (R1), placed on any of the
   * stream's servers, one that is down too (nats-server 2.9): with a server of an R3 stream lost, a
   * third of them are never made. Direct gets are answered by any live replica, one round trip per
   * frame.
   */
  private async read(subject: string, start: number, end: number, taker: () => ReplayTaker): Promise<ReplayTaker> {
    try {
      return await this.consume(subject, start, end, taker());
    } catch {
      return this.walk(subject, start, end, taker()); // from the start again
    }
  }

  private async walk(subject: string, start: number, end: number, taker: ReplayTaker): Promise<ReplayTaker> {
    for (let at = start; at <= end;) {
      const m = await this.jsm.direct.getMessage(HISTORY_STREAM, { seq: at, next_by_subj: subject });
      if (!m || m.seq > end) break; // nothing more (expired meanwhile)
      at = m.seq + 1;
      const l = leasedOf(m.header);
      if (l) taker.take(l, m.time.getTime(), () => m.string());
    }
    return taker;
  }

  private async consume(subject: string, start: number, end: number, taker: ReplayTaker): Promise<ReplayTaker> {
    const c = await this.reader.consumers.get(HISTORY_STREAM, {
      filter_subjects: subject, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: start,
    });
    try {
      // No more messages are asked for than the subject held from `start` when the consumer was
      // made: a fetch for more waits out its expiry for them (twice: 10 s by default) when frames
      // are missing (a store given up while later ones were stored), and the caller's wait with it
      // (a new owner's role, holding the account's events; a follower's gap repair; chaos seed
      // 604312773). Short of the head then: not whole, recovered:false at once.
      let left = (await c.info(true)).num_pending;
      let done = false;
      while (!done && left > 0) {
        const it = await c.fetch({ max_messages: Math.min(left, 1_000), expires: this.opts.ackTimeoutMs ?? 5_000 });
        let got = 0;
        for await (const m of it) {
          got++;
          left--;
          const l = leasedOf(m.headers);
          if (l) taker.take(l, m.info.timestampNanos / 1e6, () => m.string());
          if (m.seq >= end) {
            done = true;
            break;
          }
        }
        if (got === 0) break; // nothing more (expired meanwhile)
      }
    } finally {
      await c.delete().catch(() => undefined);
    }
    return taker;
  }
}

/**
 * What to tell the operator when this node's start changed the stream's replicas (`before`: what the
 * stream had; undefined when this start made it): every node sets its own NATS_STREAM_REPLICAS, so
 * nodes that disagree move the stream's copies back and forth at each start.
 */
export function replicasChange(before: number | undefined, now: number): string | undefined {
  if (before === undefined || before === now) return undefined;
  return `NATS_STREAM_REPLICAS=${now} changed the stream history from ${before} replicas to ${now}: ` +
    'if another node has a different value, each start changes it back; give every node the same';
}

/** What ensureStream needs of JetStream's stream API. */
export type StreamAdmin = Pick<JetStreamManager['streams'], 'info' | 'update' | 'add'>;

/**
 * Creates the stream, or updates it to `config` when it exists. Nodes that start at once all find
 * no stream and all add it; the server refuses all adds but the first ("subjects overlap", "name
 * already in use") while it creates the stream, and those nodes then update it as found.
 */
export async function ensureStream(streams: StreamAdmin, config: Partial<StreamConfig> & { name: string }): Promise<Partial<StreamConfig> | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      const found = await streams.info(config.name);
      await streams.update(config.name, config);
      return found?.config ?? {};
    } catch (err) {
      if (!/stream not found/i.test(String((err as Error).message))) throw err;
    }
    try {
      await streams.add(config);
      return undefined;
    } catch (err) {
      if (attempt >= 3 || !/subjects overlap|already in use/i.test(String((err as Error).message))) throw err;
    }
  }
}
