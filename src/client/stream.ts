// /v1/stream as a bot wants it: `for await (const frame of client.stream(id, { symbols }))` or
// `.on('TRADE', ...)`. Reconnects with jittered backoff, resumes with `since=<epoch>:<seq>`, replaces
// a silent connection (heartbeat timeout), says when continuity was lost (RESUMED recovered:false:
// reconcile from the fresh snapshots that follow), and delivers each account event once, in order.
import { backoffDelay, type BackoffOptions } from './backoff.js';
import { StreamCursor, formatSince, isPositioned, parseSince, type StreamPosition } from './cursor.js';
import { type ClosedVerdict, refusalOf, socketError, TagwError } from './errors.js';
import type { FrameOf, KnownFrame, Resumed, StreamFrame } from './frames.js';
import type { Transport } from './http.js';
import type { StreamTimeframe } from './types.js';
import { FrameChannel, LATEST_MARKET_DATA } from './queue.js';
import { CLOSE, ReconnectingSocket, type SocketState, type SocketTarget, type WebSocketConstructor } from './socket.js';

export interface StreamOptions {
  symbols?: readonly string[];
  /** Candle timeframes for every symbol (M1, H1, ... or minutes: 1, 60). */
  timeframes?: readonly StreamTimeframe[];
  /** Start from a position saved earlier (`<epoch>:<seq>`, see `stream.since`), e.g. by a bot
   *  that restarted: the gateway replays what happened since, or says recovered:false. */
  since?: string;
  /** No frame for this long (heartbeats come every 10 s) and the connection is replaced. Default 25 s. */
  heartbeatTimeoutMs?: number;
  /** An upgrade not answered within this long is given up and tried again. Default 10 s. */
  connectTimeoutMs?: number;
  backoff?: Partial<BackoffOptions>;
  /** A gap inside one epoch makes the SDK reconnect for the replay; after this many in a row
   *  without progress it gives up on the replay and signals recovered:false instead. Default 3. */
  maxGapRetries?: number;
  /** A `for await` slower than the stream gets the newest QUOTE of each symbol and CANDLE of each bar
   *  series, not every one that came while it was busy (account events, closed bars and control frames
   *  are never dropped). Default true; false keeps every frame (memory then grows while it lags). */
  coalesce?: boolean;
}

export type StreamEvents = {
  state: [SocketState, { code?: number; reason?: string; delayMs?: number } | undefined];
  /** Continuity was lost: reconcile positions and orders (the snapshots that follow are the truth). */
  resync: [Resumed];
  /** The stream stopped for good (revoked key, unknown account...). */
  error: [TagwError];
};

export const DEFAULT_STREAM_BACKOFF: BackoffOptions = { baseMs: 200, maxMs: 5_000 };
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** Refusals of a subscribe for a passing reason (503: the account's connection down, the cluster
 *  between owners or without its engines): the SDK asks again while the symbol is wanted. */
const PASSING_REFUSALS: ReadonlySet<string> = new Set(['NOT_CONNECTED', 'SERVICE_UNAVAILABLE', 'STORAGE_UNAVAILABLE']);

export function wsUrl(baseUrl: string): string {
  return baseUrl.replace(/^http(s?):\/\//i, (_m, s: string) => `ws${s}://`);
}

export class StreamSubscription implements AsyncIterable<StreamFrame & KnownFrame> {
  private readonly channel: FrameChannel<KnownFrame, StreamEvents>;
  private readonly socket: ReconnectingSocket;
  /** Where the connection resumes from: the last account event the SDK received (it may still be
   *  in the buffer of a slow `for await`). */
  private readonly cursor: StreamCursor;
  /** The last account event the consumer was handed: what `position`/`since` say, for a bot to save. */
  private taken: StreamPosition | undefined;
  private readonly wanted = new Map<string, Set<StreamTimeframe>>();
  /** Last seq per market-data topic on the current connection (QUOTE per symbol, CANDLE per bar series). */
  private topicSeq = new Map<string, number>();
  /** The next account event may start a new position without that being news (after a RESUMED
   *  recovered:false, whose snapshots follow, or on a connect without `since`). */
  private expectRebase = true;
  private gapsInARow = 0;
  /** The HTTP question in flight about a refused upgrade: close() aborts it. */
  private probe: AbortController | null = null;
  private readonly untrack: () => void;
  /** Account events dropped as already delivered (replays overlapping what came before a drop). */
  duplicatesDropped = 0;
  /** Subscribes refused for a passing reason, by symbol: how many in a row, and the timer that asks again. */
  private readonly refusedSubs = new Map<string, { tries: number; timer?: ReturnType<typeof setTimeout> }>();
  private readonly random: () => number;
  /** Connections opened so far. */
  private opens = 0;

  constructor(private readonly t: Transport, WebSocket: WebSocketConstructor, readonly accountId: string, private readonly o: StreamOptions = {}, random?: () => number) {
    const start = o.since !== undefined ? parseSince(o.since) : undefined;
    if (o.since !== undefined && !start) throw new TagwError({ code: 'BAD_REQUEST', status: 0, message: `since: expected <epoch>:<seq>, got '${o.since}'` });
    t.socketAuth(); // no API key: refused now, not by a stream that never yields
    this.random = random ?? Math.random;
    this.cursor = new StreamCursor(start);
    this.taken = start;
    for (const s of o.symbols ?? []) this.wanted.set(s, new Set(o.timeframes ?? []));
    this.channel = new FrameChannel<KnownFrame, StreamEvents>(() => this.close(), (f) => {
      if (isPositioned(f)) this.taken = { epoch: f.epoch, seq: f.seq };
    }, o.coalesce === false ? undefined : LATEST_MARKET_DATA);
    this.socket = new ReconnectingSocket(
      { WebSocket, backoff: { ...DEFAULT_STREAM_BACKOFF, ...o.backoff }, silenceMs: o.heartbeatTimeoutMs ?? 25_000, connectTimeoutMs: o.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS, ...(random ? { random } : {}) },
      {
        url: async () => this.url(),
        opened: (send) => this.opened(send),
        frame: (text) => this.onText(text),
        closed: (code, reason, everOpened) => this.onClosed(code, reason, everOpened),
        failed: (e, withHeaders) => this.fail(socketError(e, withHeaders)),
        state: (s, d) => this.channel.emit('state', s, d),
      },
    );
    this.untrack = t.track(this);
    this.socket.start();
  }

  /** The position of the last account event handed to you (your callbacks ran for it, or your
   *  `for await` got it; not one still waiting in the buffer): save it to resume after a restart. */
  get position(): StreamPosition | undefined {
    return this.taken ? { ...this.taken } : undefined;
  }

  /** `position` as `<epoch>:<seq>`, for `client.stream(id, { since })`. */
  get since(): string | undefined {
    return this.taken ? formatSince(this.taken) : undefined;
  }

  /** QUOTE and CANDLE frames a newer one of their symbol (bar series) replaced in the buffer of a
   *  `for await` slower than the stream (`coalesce`), for your metrics. */
  get coalesced(): number {
    return this.channel.coalesced;
  }

  /** Connections replaced so far (closes, stalls, gaps). */
  get reconnects(): number {
    return this.socket.reconnects;
  }

  on<T extends KnownFrame['type']>(type: T, listener: (frame: FrameOf<T>) => void): () => void;
  on(type: '*', listener: (frame: KnownFrame) => void): () => void;
  on(type: string, listener: (frame: any) => void): () => void {
    return this.channel.onFrame(type, listener);
  }

  onEvent<K extends keyof StreamEvents>(event: K, listener: (...args: StreamEvents[K]) => void): () => void {
    return this.channel.onEvent(event, listener);
  }

  subscribe(symbol: string, timeframes: readonly StreamTimeframe[] = []): void {
    const set = this.wanted.get(symbol) ?? new Set<StreamTimeframe>();
    for (const tf of timeframes) set.add(tf);
    this.wanted.set(symbol, set);
    this.socket.send({ action: 'subscribe', symbol, ...(timeframes.length ? { timeframes } : {}) });
  }

  unsubscribe(symbol: string): void {
    this.wanted.delete(symbol);
    clearTimeout(this.refusedSubs.get(symbol)?.timer);
    this.refusedSubs.delete(symbol);
    this.socket.send({ action: 'unsubscribe', symbol });
  }

  close(): void {
    this.untrack();
    this.probe?.abort();
    this.forgetRefusals();
    this.socket.close();
    this.channel.end();
  }

  [Symbol.asyncIterator](): AsyncIterator<KnownFrame> {
    return this.channel[Symbol.asyncIterator]();
  }

  private url(): SocketTarget {
    const auth = this.t.socketAuth();
    const q = new URLSearchParams({ id: this.accountId, ...auth.query });
    const since = this.cursor.since();
    if (since !== undefined) q.set('since', since);
    this.expectRebase = since === undefined;
    return { url: `${wsUrl(this.t.baseUrl)}/v1/stream?${q}`, headers: auth.headers };
  }

  private opened(send: (m: unknown) => void): void {
    this.topicSeq = new Map();
    // Every wanted symbol is asked for now: no retry of an earlier connection's refusal is left to run.
    for (const r of this.refusedSubs.values()) clearTimeout(r.timer);
    // A connection again before any account event came (a P4 account sends no snapshot; a P5 socket
    // closed before its snapshot): there is no position to resume from, so what the account did
    // between the connections is not replayed. Said as a re-sync; before, those events were missed
    // without a word (found by the cluster chaos run on a P4 account).
    if (this.opens++ > 0 && this.cursor.since() === undefined) this.lostContinuity('reconnected before any account event arrived: events between the connections are not replayed');
    for (const [symbol, tfs] of this.wanted) send({ action: 'subscribe', symbol, ...(tfs.size ? { timeframes: [...tfs] } : {}) });
  }

  private onText(text: string): void {
    let f: KnownFrame;
    try {
      f = JSON.parse(text) as KnownFrame;
    } catch {
      return; // the gateway sends JSON only; anything else is not a frame
    }
    if (f.type === 'RESUMED') {
      const r = f.data as Resumed;
      this.cursor.resumed(r.recovered);
      if (!r.recovered) this.expectRebase = true;
      this.channel.push(f);
      if (!r.recovered) this.channel.emit('resync', r);
      return;
    }
    if (isPositioned(f)) {
      const beforeEpoch = this.cursor.epoch;
      const verdict = this.cursor.accept(f);
      if (verdict === 'duplicate') {
        this.duplicatesDropped++;
        return;
      }
      if (verdict === 'gap') {
        if (++this.gapsInARow <= (this.o.maxGapRetries ?? 3)) {
          this.socket.restart(`gap after ${this.cursor.since()}, got ${f.seq}`); // a gap leaves the position where it was
          return;
        }
        this.cursor.resumed(false);
        this.cursor.accept(f);
        this.lostContinuity('the gateway kept skipping account events; resynchronize');
      } else if (!this.expectRebase && beforeEpoch !== undefined && beforeEpoch !== f.epoch) {
        this.lostContinuity(`epoch changed from ${beforeEpoch} to ${f.epoch}`);
      }
      this.gapsInARow = 0;
      this.expectRebase = false;
      this.channel.push(f);
      return;
    }
    if (f.type === 'ERROR') this.refused(f.data);
    else if (f.type === 'SUBSCRIBED') this.refusedSubs.delete(f.data.symbol);
    if ((f.type === 'QUOTE' || f.type === 'CANDLE') && typeof f.seq === 'number') {
      // Per topic, within the market epoch (new at each gateway start, when the counters restart).
      const key = f.type === 'QUOTE' ? `q|${f.epoch}|${f.data.symbol}` : `c|${f.epoch}|${f.data.symbol}|${f.data.timeframe}`;
      const last = this.topicSeq.get(key);
      // A coalesced catch-up may repeat the last seq of a topic (docs/stream.md): once is enough.
      if (last !== undefined && f.seq <= last) return;
      this.topicSeq.set(key, f.seq);
    }
    this.channel.push(f);
  }

  /**
   * An ERROR answering a subscribe: refused for a passing reason (PASSING_REFUSALS) while the symbol
   * is still wanted, the same subscribe goes again after the stream's backoff (longer each time in a
   * row, from the bottom again once a SUBSCRIBED came). Before, such a symbol stayed without quotes
   * until the next reconnect, which might never come (the cluster chaos run: a subscribe refused while
   * its account changed owner).
   */
  private refused(data: { error: string; request?: unknown }): void {
    const req = data.request as { action?: unknown; symbol?: unknown } | undefined;
    const symbol = req?.action === 'subscribe' && typeof req.symbol === 'string' ? req.symbol : undefined;
    if (symbol === undefined || !PASSING_REFUSALS.has(data.error) || !this.wanted.has(symbol)) return;
    const r = this.refusedSubs.get(symbol) ?? { tries: 0 };
    clearTimeout(r.timer);
    r.timer = setTimeout(() => {
      const tfs = this.wanted.get(symbol);
      if (tfs) this.socket.send({ action: 'subscribe', symbol, ...(tfs.size ? { timeframes: [...tfs] } : {}) });
    }, backoffDelay(r.tries++, { ...DEFAULT_STREAM_BACKOFF, ...this.o.backoff }, this.random));
    this.refusedSubs.set(symbol, r);
  }

  private forgetRefusals(): void {
    for (const r of this.refusedSubs.values()) clearTimeout(r.timer);
    this.refusedSubs.clear();
  }

  private lostContinuity(reason: string): void {
    const r: Resumed = { recovered: false, replayed: 0, synthetic: true, reason };
    this.channel.push({ type: 'RESUMED', data: r });
    this.channel.emit('resync', r);
  }

  private async onClosed(code: number, reason: string, everOpened: boolean): Promise<ClosedVerdict> {
    if (code === CLOSE.KEY_REVOKED) return this.fail(new TagwError({ code: 'KEY_REVOKED', status: 401, message: reason || 'API key revoked' }));
    if (everOpened) return 'retry';
    // The upgrade was refused (a WebSocket does not show why): ask over HTTP with the same key and
    // account. A refusal that retrying cannot fix (401, 403, 404) ends the stream instead of
    // hammering the gateway, where 401s count toward the failed-auth block.
    const probe = (this.probe = new AbortController());
    const refused = await refusalOf(() => this.t.call({ method: 'GET', path: '/Ping', auth: 'api', safety: 'safe', tries: 1, query: { id: this.accountId }, signal: probe.signal }));
    if (this.probe === probe) this.probe = null;
    if (probe.signal.aborted) return 'stop';
    if (refused.final) return this.fail(refused.final);
    return refused.retryAfterMs !== undefined ? { retryAfterMs: refused.retryAfterMs } : 'retry';
  }

  private fail(e: TagwError): 'stop' {
    this.channel.fail(e);
    return 'stop';
  }
}
