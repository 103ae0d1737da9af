// Backpressure and coalescing of /v1/stream sockets (main thread).
//
// uWS's maxBackpressure is set to the HARD limit, so publish never skips a socket we have not
// noticed yet. A sweep (every streamSweepMs, only when something was published) reads
// getBufferedAmount() of each socket; a socket over the SOFT limit is unsubscribed from its market
// topics and enters "coalescing": from then on it costs the publish loop nothing, and what it would
// have received is, per topic, just the latest frame (each topic keeps its latest frame anyway, so
// the coalescing buffer is a set of topics, bounded by the socket's subscriptions). On drain below
// the low-water mark the socket gets the latest frame of every topic that moved, and rejoins the
// topics. Frames of the socket's own (account events, heartbeats, acks, errors) are sent per socket
// and never dropped: if one would take the socket over the hard limit, it is closed with
// SOCKET_CLOSE.BACKPRESSURE.
//
// Room for the close frame. uWS drops any frame, the close frame included, to a socket already over
// its maxBackpressure (the client then sees 1006, not 4008). So uWS's limit is the hard limit plus a
// reserve, and no socket gets near it: our own frames stop at the hard limit, and publishes (which
// uWS alone sees per socket) can add at most the bytes published since the last sweep, which runs
// at once whenever that passes half the reserve. A socket over the hard limit at a sweep is closed.
import type { Config } from '../config.js';
import { SOCKET_CLOSE, type SocketCloseName } from './closeCodes.js';
import { candleData, quoteData } from '../runtime/frameData.js';
import { controlFrame, errorData, marketFrame, type FrameType } from './frames.js';
import type { Sock, StreamCounters } from './state.js';
import type { Topics } from './topics.js';

export class Outbox {
  readonly soft: number;
  readonly hard: number;
  /** uWS's maxBackpressure: the hard limit plus room for what a burst publishes between two sweeps and the close frame. */
  readonly uwsLimit: number;
  readonly lowWater: number;
  readonly coalescing = new Set<Sock>();

  constructor(config: Config, private readonly topics: Topics, private readonly sockets: Set<Sock>, private readonly counters: StreamCounters) {
    this.soft = config.streamSoftLimitBytes;
    this.hard = Math.max(config.streamHardLimitBytes, this.soft * 2);
    this.lowWater = Math.floor(this.soft / 2);
    const reserve = Math.max(64 * 1024, Math.floor(this.hard / 4));
    this.uwsLimit = this.hard + reserve;
    topics.publishBudget = reserve / 2;
    topics.onBudgetSpent = () => this.sweep();
  }

  end(sock: Sock, why: SocketCloseName): void {
    if (sock.closed) return;
    if (why === 'BACKPRESSURE') this.counters.backpressureCloses++;
    const c = SOCKET_CLOSE[why];
    sock.ws.end(c.code, c.reason);
  }

  /** A control frame (HEARTBEAT, SUBSCRIBED, UNSUBSCRIBED, ERROR, RESUMED). */
  sendControl(sock: Sock, type: FrameType, dataJson: string): boolean {
    return this.sendText(sock, controlFrame(type, dataJson));
  }

  /** A frame of the socket's own (account events and control frames), never dropped silently:
   *  one that does not fit under the hard limit closes the socket. False if it is (now) closed. */
  sendText(sock: Sock, msg: string): boolean {
    if (sock.closed) return false;
    if (sock.ws.getBufferedAmount() + msg.length > this.hard) {
      this.end(sock, 'BACKPRESSURE');
      return false;
    }
    sock.ws.send(msg);
    return true;
  }

  errorFrame(sock: Sock, code: string, message: string, request?: unknown): void {
    this.sendControl(sock, 'ERROR', errorData(code, message, request));
  }

  /** uWS drain: a coalescing socket that drained below the low-water mark catches up. */
  onDrain(sock: Sock): void {
    if (sock.coalescing && sock.ws.getBufferedAmount() <= this.lowWater) this.flush(sock);
  }

  sweep(): void {
    if (this.topics.publishedBytes === 0 && this.coalescing.size === 0) return;
    this.topics.publishedBytes = 0;
    for (const s of this.sockets) {
      if (s.closed) continue;
      const buffered = s.ws.getBufferedAmount();
      if (buffered > this.hard) {
        this.end(s, 'BACKPRESSURE'); // over the limit through publishes; the close still fits (see above)
      } else if (!s.coalescing) {
        if (buffered > this.soft) this.startCoalescing(s, buffered);
      } else if (buffered <= this.lowWater) {
        this.flush(s);
      }
    }
  }

  forget(sock: Sock): void {
    this.coalescing.delete(sock);
  }

  private startCoalescing(s: Sock, buffered: number): void {
    s.coalescing = true;
    this.coalescing.add(s);
    // If uWS may already have skipped frames for this socket (over its maxBackpressure), every topic must be flushed.
    const risk = buffered + 64 * 1024 >= this.uwsLimit;
    for (const t of s.quotes.values()) {
      s.ws.unsubscribe(t.key);
      s.leftAt.set(t.key, risk ? -1 : t.seq);
    }
    for (const c of s.candles.values()) {
      s.ws.unsubscribe(c.partial ? c.topic.partialKey : c.topic.key);
      s.leftAt.set(c.topic.key, risk ? -1 : c.topic.seq);
    }
  }

  /** Latest frame of every topic that moved since the socket left it; rejoin when drained. */
  private flush(s: Sock): void {
    if (s.closed) return;
    this.counters.coalescedFlushes++;
    const ws = s.ws;
    const now = this.topics.shardClock.now(); // quote ages: on the market's clock
    ws.cork(() => {
      for (const t of s.quotes.values()) {
        const at = s.leftAt.get(t.key) ?? -1;
        const srv = this.topics.servers.get(t.server);
        if (t.seq > at && t.lastTick && srv) {
          // Re-encoded so ageMs tells how old the coalesced quote is now.
          ws.send(marketFrame('QUOTE', t.seq, this.topics.epoch, quoteData(t.lastTick, srv.clock, now + (srv.info.clockOffsetMs ?? 0))));
        }
        s.leftAt.set(t.key, t.seq);
      }
      for (const c of s.candles.values()) {
        const t = c.topic;
        const at = s.leftAt.get(t.key) ?? -1;
        if (t.seq > at && t.last) {
          const lc = t.lastClosed;
          if (lc && lc.ev !== t.last && lc.seq > at && lc.at >= c.joinedAt) {
            // A bar closed while the socket was behind and the next one has started since.
            if (c.partial && lc.ev.candle.time * 1000 >= c.joinedAt) c.partial = false;
            ws.send(marketFrame('CANDLE', lc.seq, this.topics.epoch, candleData(lc.ev, c.partial)));
            c.partial = false;
          }
          if (c.partial && t.last.candle.time * 1000 >= c.joinedAt) c.partial = false;
          ws.send(marketFrame('CANDLE', t.seq, this.topics.epoch, candleData(t.last, c.partial)));
          if (t.last.closed) c.partial = false;
        }
        s.leftAt.set(t.key, t.seq);
      }
    });
    if (ws.getBufferedAmount() > this.lowWater) return; // still behind: wait for the next drain
    s.coalescing = false;
    this.coalescing.delete(s);
    s.leftAt.clear();
    for (const t of s.quotes.values()) ws.subscribe(t.key);
    for (const c of s.candles.values()) {
      if (c.partial) {
        c.topic.partialMembers.add(s);
        ws.subscribe(c.topic.partialKey);
      } else {
        c.topic.partialMembers.delete(s);
        ws.subscribe(c.topic.key);
      }
    }
  }
}
