// Numbering by the owner, delivery on every node (docs/cluster.md "Streams and resume"). The owner
// of an account numbers its events once and writes the numbered frames to JetStream (jsHistory.ts);
// every message stored there is also delivered to plain subscribers of its subject, so a node that
// follows the account takes the owner's frames, not raw events, and sends the same seq everywhere.
//
// AccountFeed: one node's view of one account's numbered frames. It subscribes first, then (for a
// resume) replays from JetStream what came after the client's position, then delivers what arrived
// meanwhile past that: no gap, no duplicate. A live frame that skips a number (messages lost while
// NATS reconnected) is repaired from JetStream; so is the tail a reconnect missed with no frame
// after it (catchUp: JetStream's head, read once the connection is back); a new epoch is reported.
// takeOver(): what a new owner continues from.
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import type { DealMark } from '../store/streamHistory.js';
import { errorMessage } from '../util/errorMessage.js';
import { H_WHY, historySubject, leasedOf, type HistoryHead, type JetStreamHistory, type StreamPosition } from './jsHistory.js';
import { LeaseOrder } from './leaseOrder.js';

export interface FeedFrame {
  epoch: string; seq: number; frame: string; /** an epoch marker's reason */ why?: 'rebound';
  /** Its writer's lease and whether it is a takeover's fence (leaseOrder.ts). */
  lease?: number; fence?: boolean;
}

/** How a feed began: for a resume, whether everything after `since` was there (then `replayed` frames came first).
 *  `storedAt`: when JetStream stored the frame at `position` (a start from the head; null for a resume). */
export interface FeedStart { recovered: boolean; replayed: number; position: StreamPosition | null; storedAt: number | null }

export interface AccountFeedOptions {
  nc: NatsConnection;
  history: JetStreamHistory;
  accountId: string;
  /** A resume position, or null: start from where the stream is now (the caller sends a snapshot). */
  since: StreamPosition | null;
  /** Each frame once, in order (replayed ones first). */
  onFrame: (f: FeedFrame) => void;
  /** The stream went on in another epoch (a new owner could not continue), or a gap could not be
   *  repaired: the position before it is gone; clients re-sync. The feed continues in `epoch`.
   *  `why`: the owner began it because the account was bound to another login. `at`: the feed
   *  continues after that seq of `epoch`, which the frames it delivered went past or fell short of
   *  (a later owner continues from before them: an earlier owner's writes stored after its fence). */
  onBreak: (epoch: string, why?: 'rebound', at?: number) => void;
  log: Logger;
  /** Waits between replays of a gap JetStream has not filled yet (REPAIR_WAITS_MS). */
  repairWaitsMs?: readonly number[];
  /** Called once when the feed closes. */
  onClose?: () => void;
}

/** A queued catch-up (AccountFeed.catchUp) among the live frames. */
const CATCH_UP = Symbol('catch up');

/** Waits between tries of a catch-up whose head read failed (JetStream still coming up after a
 *  nats-server restart): ~7.5 s in all, then the next live frame repairs what is missing. */
const CATCH_UP_WAITS_MS = [250, 500, 1_000, 2_000, 4_000] as const;

/** ~5 s in all: an owner's retried store is acknowledged within its ack timeout (5 s) or given up. */
const REPAIR_WAITS_MS = [25, 50, 100, 200, 400, 800, 1_600, 2_000] as const;

export class AccountFeed {
  private cursor: StreamPosition | null = null;
  /** The lease order of what the feed met (leaseOrder.ts): an earlier owner's write after a later
   *  owner's fence is skipped. */
  private order = new LeaseOrder();
  /** Live frames in arrival order, processed one at a time (a repair is awaited in between), and
   *  catch-ups where they were asked. */
  private queue: Array<FeedFrame | typeof CATCH_UP> = [];
  private running = false;
  private started = false;
  private closed = false;
  private sub: Subscription | undefined;

  private constructor(private readonly o: AccountFeedOptions) {}

  static async open(o: AccountFeedOptions): Promise<{ feed: AccountFeed; start: FeedStart }> {
    const feed = new AccountFeed(o);
    try {
      return { feed, start: await feed.begin() };
    } catch (err) {
      // Its subscription goes with it: a role tried again opens another feed (one left per failed try).
      feed.close();
      throw err;
    }
  }

  /** The last frame delivered (or the position the feed started from). */
  get position(): StreamPosition | null {
    return this.cursor;
  }

  /** A feed that began with nothing stored continues from where its owner placed the stream since
   *  (an epoch it read or started): a later epoch's marker is then reported as a break. */
  seek(position: StreamPosition): void {
    this.cursor ??= { ...position };
  }

  private async begin(): Promise<FeedStart> {
    const { nc, history, accountId, since } = this.o;
    this.sub = nc.subscribe(historySubject(accountId), {
      callback: (err, msg) => {
        if (err || this.closed) return;
        const l = leasedOf(msg.headers);
        if (!l) return;
        const why = l.seq === 0 && msg.headers?.get(H_WHY) === 'rebound' ? 'rebound' as const : undefined;
        this.queue.push({ ...l, frame: msg.string(), ...(why ? { why } : {}) });
        if (this.started) void this.drain();
      },
    });
    await nc.flush(); // the interest is at the server: whatever is stored from now on reaches us
    let start: FeedStart;
    const r = since ? await history.replay(accountId, since) : { recovered: false as const };
    if (since && r.recovered) {
      this.cursor = { ...since };
      this.order = new LeaseOrder(r.lease ?? 0);
      for (const e of r.entries) this.deliver({ epoch: since.epoch, seq: e.seq, frame: e.frame });
      start = { recovered: true, replayed: r.entries.length, position: this.cursor, storedAt: null };
    } else {
      const head = await history.head(accountId);
      this.cursor = head ? { epoch: head.epoch, seq: head.seq } : null;
      this.order = new LeaseOrder(head?.lease ?? 0);
      start = { recovered: false, replayed: 0, position: this.cursor, storedAt: head?.at ?? null };
    }
    this.started = true;
    await this.drain();
    return start;
  }

  /**
   * The node's NATS connection is back after it was down: what the owner stored meanwhile never
   * reached this subscription, and a live frame after it would show the gap, but none may come (the
   * owner's stream closed, its clients stuck elsewhere): JetStream's head is taken as if it had just
   * arrived (a gap repaired from JetStream, another epoch a break), in turn with the live frames.
   * Before, the socket went without those frames until the owner's next one (chaos seed 604312773).
   */
  catchUp(): void {
    if (this.closed || this.queue.includes(CATCH_UP)) return;
    this.queue.push(CATCH_UP);
    if (this.started) void this.drain();
  }

  private async probe(): Promise<void> {
    for (const waitMs of [...CATCH_UP_WAITS_MS, null]) {
      if (this.closed || !this.cursor) return;
      try {
        const head = await this.o.history.head(this.o.accountId);
        if (!head || this.closed) return;
        return await this.accept(headFrame(head));
      } catch (err) {
        if (waitMs === null) {
          this.o.log.warn('account feed could not catch up after a reconnect; the next frame repairs the gap', { accountId: this.o.accountId, err: errorMessage(err) });
          return;
        }
      }
      await new Promise((r) => setTimeout(r, waitMs));
    }
  }

  private deliver(f: FeedFrame): void {
    this.cursor = { epoch: f.epoch, seq: f.seq };
    if (f.seq > 0) this.o.onFrame(f); // seq 0: an epoch's start marker, no frame
  }

  private async drain(): Promise<void> {
    if (this.running) return;
    this.running = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        const item = this.queue.shift()!;
        await (item === CATCH_UP ? this.probe() : this.accept(item));
      }
    } catch (err) {
      this.o.log.error('account feed stopped', { accountId: this.o.accountId, err: errorMessage(err) });
    } finally {
      this.running = false;
    }
  }

  private async accept(f: FeedFrame): Promise<void> {
    const c = this.cursor;
    // A plain subscriber also gets what JetStream refused to store: the marker of a node that lost
    // the race to start the account's first epoch (startFirstEpoch). Not an epoch of the stream.
    // (A fence refused for a write stored before it, which this feed took, counts as its owner's
    // tenure begun: the same owner fences again, after that write.)
    if ((!c || f.epoch !== c.epoch) && f.seq === 0 && (await this.o.history.head(this.o.accountId))?.epoch !== f.epoch) return;
    // An earlier owner's write stored after a later owner's fence: not part of the stream.
    const met = this.order.meet(f);
    if (met === 'stale') return;
    // A fence restates where its owner continues: nothing to deliver, the position to be at.
    const to = f.fence ? f.seq : f.seq - 1;
    if (!c) {
      if (f.fence) this.cursor = { epoch: f.epoch, seq: f.seq };
      else this.deliver(f); // no history before it: the stream starts here for us
      return;
    }
    if (f.epoch !== c.epoch) {
      if (f.fence) return void this.rewind(f.epoch, f.seq);
      this.o.onBreak(f.epoch, f.why);
      return this.deliver(f);
    }
    // A later owner's frame at or before what this feed delivered: that was an earlier owner's
    // write stored after the later one's fence (taken before the fence was met: a head read between
    // the fence and its note). A fence never rewinds: one refused for a write stored before it
    // restates less than the stream holds.
    if (met === 'newer' && !f.fence && c.seq > to) {
      this.rewind(f.epoch, to);
      return this.deliver(f);
    }
    if (f.seq <= c.seq) return; // replayed already, or a republished frame
    if (c.seq === to) return f.fence ? undefined : this.deliver(f);
    // Skipped numbers: fetch them from JetStream. A plain subscriber can get a message before the
    // stream has stored it, or the frames before it (an owner's store being retried): a replay that
    // ends short of f is asked again, a little later each time; a gap that stays is a break, never
    // silence (f dropped with no break left the socket stale until another frame came).
    for (const waitMs of [...(this.o.repairWaitsMs ?? REPAIR_WAITS_MS), null]) {
      const r = await this.o.history.replay(this.o.accountId, this.cursor!);
      if (this.closed) return;
      if (!r.recovered) break;
      if (r.lease) this.order.meet({ lease: r.lease });
      for (const e of r.entries) if (e.seq > this.cursor!.seq) this.deliver({ epoch: c.epoch, seq: e.seq, frame: e.frame });
      if (this.cursor!.seq >= f.seq) return;
      if (this.cursor!.seq === to) return f.fence ? undefined : this.deliver(f);
      if (waitMs !== null) await new Promise((r) => setTimeout(r, waitMs));
    }
    this.rewind(f.epoch, to);
    if (!f.fence) this.deliver(f);
  }

  /** The stream continues after `seq` of `epoch`, not after the cursor: clients re-sync. */
  private rewind(epoch: string, seq: number): void {
    this.o.onBreak(epoch, undefined, seq);
    this.cursor = { epoch, seq };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sub?.unsubscribe();
    this.queue = [];
    this.o.onClose?.();
  }
}

/** A head read as a frame (a probe's): a fence's restated position, an epoch's marker, the last frame. */
function headFrame(head: HistoryHead): FeedFrame {
  return { epoch: head.epoch, seq: head.seq, frame: head.frame, ...(head.seq === 0 && head.why ? { why: head.why } : {}), ...(head.lease > 0 ? { lease: head.lease } : {}), ...(head.fence ? { fence: true } : {}) };
}

/** How many times a takeover reads the head again after a write of an earlier owner landed
 *  between its read and its fence. */
const FENCE_TRIES = 8;

/** Where a new owner's numbering begins: the epoch continues when JetStream holds its last number
 *  (every frame any client got was stored before it was sent); otherwise a new epoch, announced by
 *  its start marker (written only if the account still has no message: nodes racing agree on one),
 *  and resumers from the old one get recovered:false. A follower with nothing to follow yet uses it
 *  too, so its sockets' snapshot is in the epoch the owner will continue. `storedAt`: when JetStream
 *  stored the head continued from (null: the epoch started here). With `lease` (an owner's lease
 *  epoch) the tenure begins with a fence (JetStreamHistory.fence): a write of an earlier owner stored
 *  between the head's read and the fence makes it read the head again and continue after that write;
 *  one stored after the fence is skipped by every reader (leaseOrder.ts). */
export async function takeOver(
  history: JetStreamHistory, accountId: string, newEpoch: () => string, startDeal: DealMark, lease?: number,
): Promise<{ epoch: string; seq: number; deal: DealMark; continued: boolean; storedAt: number | null }> {
  for (let attempt = 0; ; attempt++) {
    const head = await history.head(accountId);
    if (head && lease !== undefined && head.lease > lease) throw new Error(`account ${accountId}: its history has a later owner (lease ${head.lease}) than this one (${lease})`);
    if (head && (lease === undefined || await history.fence(accountId, head, lease))) {
      return { epoch: head.epoch, seq: head.seq, deal: head.deal, continued: true, storedAt: head.at };
    }
    if (!head) {
      const epoch = newEpoch();
      if (await history.startFirstEpoch(accountId, epoch, startDeal, lease)) return { epoch, seq: 0, deal: startDeal, continued: false, storedAt: null };
    }
    // Another node started one meanwhile, or a write landed after the head read: read again.
    if (attempt >= FENCE_TRIES) throw new Error(`no epoch could be started or read for account ${accountId}`);
  }
}
