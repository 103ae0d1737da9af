// The account stream's history (pure: no I/O, time passed in). Each account event gets the next
// `seq` of its account's epoch and is kept, as the exact frame text sent, for a bounded time and
// count, so a client that reconnects with `since=<epoch>:<seq>` gets exactly what it missed
// (docs/stream.md "Resuming"). Persistence (store/streamHistory.ts) and delivery are elsewhere.
import { randomBytes } from 'node:crypto';
import { accountFrame, type FrameType } from './frames.js';

export interface HistoryEntry { seq: number; at: number; frame: string }
export interface HistoryLimits { maxEvents: number; maxAgeMs: number }
export interface StreamPosition { epoch: string; seq: number }

const SINCE = /^([A-Za-z0-9_-]{1,32}):(0|[1-9][0-9]{0,15})$/;

/** `<epoch>:<seq>` as the client sends it; null when it is not that. */
export function parseSince(text: string): StreamPosition | null {
  const m = SINCE.exec(text);
  if (!m) return null;
  const seq = Number(m[2]);
  return Number.isSafeInteger(seq) ? { epoch: m[1]!, seq } : null;
}

/** A fresh epoch: opaque, unique enough across restarts (time) and processes (random). */
export function newEpoch(nowMs: number): string {
  return `${nowMs.toString(36)}${randomBytes(3).toString('hex')}`;
}

export type Replay = { recovered: true; entries: HistoryEntry[] } | { recovered: false };

export class AccountHistory {
  private entries: HistoryEntry[];
  /** Index of the first live entry (entries before it were trimmed; compacted now and then). */
  private head = 0;

  /** The seq up to which frames have gone to live sockets: stored first (SQLite, or in cluster
   *  mode JetStream's ack, which comes later than the numbering). No socket is placed past it. */
  private delivered: number;

  constructor(readonly epoch: string, private last: number, private readonly limits: HistoryLimits, entries: HistoryEntry[] = []) {
    this.entries = entries;
    this.delivered = last;
  }

  /** The seq of the latest event of this epoch (0: none yet). */
  get seq(): number {
    return this.last;
  }

  get sent(): number {
    return this.delivered;
  }

  /** Frames up to `seq` were stored and went to the live sockets. */
  markSent(seq: number): void {
    if (seq > this.delivered) this.delivered = Math.min(seq, this.last);
  }

  /** Forgets the frames numbered after what went to the sockets: the history continues from there. */
  dropUnsent(): void {
    while (this.entries.length > this.head && this.entries.at(-1)!.seq > this.delivered) this.entries.pop();
    this.last = this.delivered;
  }

  /** The oldest seq still held (seq + 1 when none is). */
  get firstSeq(): number {
    return this.head < this.entries.length ? this.entries[this.head]!.seq : this.last + 1;
  }

  append(type: FrameType, dataJson: string, now: number): HistoryEntry {
    const seq = ++this.last;
    const e: HistoryEntry = { seq, at: now, frame: accountFrame(type, seq, this.epoch, dataJson) };
    this.entries.push(e);
    this.trim(now);
    return e;
  }

  /** A frame numbered elsewhere (cluster mode: by the account's owner), the next of this history. */
  put(seq: number, frame: string, now: number): HistoryEntry {
    this.last = seq;
    const e: HistoryEntry = { seq, at: now, frame };
    this.entries.push(e);
    this.trim(now);
    return e;
  }

  /** Drops what is over the count or older than the age limit. */
  trim(now: number): void {
    const { maxEvents, maxAgeMs } = this.limits;
    while (this.head < this.entries.length
      && (this.entries.length - this.head > maxEvents || this.entries[this.head]!.at < now - maxAgeMs)) this.head++;
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }

  /** Everything after `since`, if this history still holds all of it. */
  replay(since: StreamPosition, now: number): Replay {
    this.trim(now);
    if (since.epoch !== this.epoch || since.seq > this.last) return { recovered: false };
    if (since.seq + 1 < this.firstSeq) return { recovered: false };
    // The first entry after `since` (binary search: seqs ascend).
    let lo = this.head;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.entries[mid]!.seq <= since.seq) lo = mid + 1;
      else hi = mid;
    }
    const entries = this.entries.slice(lo);
    // Consecutive from since + 1 to the last seq, or a write was lost (a hole after a restart): cannot vouch.
    const whole = entries.length === this.last - since.seq && (entries.length === 0 || entries[0]!.seq === since.seq + 1);
    return whole ? { recovered: true, entries } : { recovered: false };
  }
}
