// The client protocol of /v1/stream: subscribe/unsubscribe messages, handled one at a time in the
// order sent, each answered (SUBSCRIBED, UNSUBSCRIBED or ERROR) in that order (docs/stream.md).
import { z } from 'zod';
import type { Config } from '../config.js';
import { toApiError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Tick } from '../market/server.js';
import { parseTimeframe, type Timeframe } from '../market/timeframes.js';
import type { Shards } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import type { AccountEvents } from './accountEvents.js';
import type { AccountStreams } from './accounts.js';
import { parseSince, type StreamPosition } from './history.js';
import { candleData, quoteData } from '../runtime/frameData.js';
import { isNoOpenStream } from '../runtime/hosts/streamCommands.js';
import { strictParams } from '../http/schemas.js';
import { marketFrame } from './frames.js';
import type { Outbox } from './outbox.js';
import type { QuoteTopic, Sock } from './state.js';
import type { Topics } from './topics.js';

export const MAX_SYMBOLS_PER_SOCKET = 256;

// Strict, as HTTP bodies and the /v1/proxy and /news queries are: a field the protocol does not know
// (`timeFrame`, the spelling of /v1/proxy's PriceHistory) is an ERROR naming it, never a subscription
// made without it.
const ClientMessage = strictParams({
  action: z.enum(['subscribe', 'unsubscribe']),
  symbol: z.string().min(1).max(64).optional(),
  symbols: z.array(z.string().min(1).max(64)).min(1).max(MAX_SYMBOLS_PER_SOCKET).optional(),
  timeframe: z.union([z.string(), z.number()]).optional(),
  timeframes: z.array(z.union([z.string(), z.number()])).max(9).optional(),
}, 'field').refine((m) => m.symbol !== undefined || m.symbols !== undefined, { message: "'symbol' (or 'symbols') is required" });
/** A subscribe or unsubscribe message as a client may send it (the SDK's stream types come from it). */
export type ClientMessageInput = z.input<typeof ClientMessage>;

export interface ClientProtocolDeps { config: Config; shards: Shards; log: Logger }

export class ClientProtocol {
  constructor(
    private readonly deps: ClientProtocolDeps, private readonly topics: Topics,
    private readonly accounts: AccountStreams, private readonly events: AccountEvents, private readonly out: Outbox,
  ) {}

  onMessage(sock: Sock, raw: ArrayBuffer, isBinary: boolean): void {
    // Copied now: uWS's buffer is only valid during this call.
    const text = isBinary ? null : Buffer.from(raw).toString('utf8');
    if (sock.deferred) sock.deferred.push(() => this.enqueue(sock, text));
    else this.enqueue(sock, text);
  }

  /**
   * Client messages are handled one at a time, in the order sent: a subscribe waits for the shard,
   * and an unsubscribe (or anything else) sent right after it must neither overtake it nor cancel
   * it before its SUBSCRIBED ack goes out. Every message gets its answer, in order.
   */
  private enqueue(sock: Sock, text: string | null): void {
    sock.inbox = sock.inbox.then(() => this.onText(sock, text)).catch((err: unknown) => {
      this.deps.log.error('stream message failed', { err: errorMessage(err) });
    });
  }

  private async onText(sock: Sock, text: string | null): Promise<void> {
    if (sock.closed) return;
    // since=message: the first message, whatever it is, starts the account stream (resumed or fresh).
    const held = sock.stream === 'held';
    const resume = this.resumeRequest(text);
    if (held) this.events.startHeld(sock, resume?.pos ?? null);
    if (resume) {
      if (!held || !resume.pos) {
        const why = !resume.pos ? "'since' must be <epoch>:<seq>" : 'resume is understood only as the first message of a socket opened with since=message';
        this.out.errorFrame(sock, 'BAD_REQUEST', why, resume.json);
      }
      return;
    }
    if (text === null) {
      this.out.errorFrame(sock, 'BAD_REQUEST', 'binary messages are not understood; send JSON text');
      return;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      this.out.errorFrame(sock, 'INVALID_JSON', 'message is not valid JSON', text.slice(0, 200));
      return;
    }
    const r = ClientMessage.safeParse(json);
    if (!r.success) {
      const why = r.error.issues.map((i) => `${i.path.join('.') || 'message'}: ${i.message}`).join('; ');
      const unknownField = r.error.issues.some((i) => i.code === 'unrecognized_keys');
      this.out.errorFrame(sock, unknownField ? 'INVALID_PARAMETER' : 'BAD_REQUEST', `${why}. Expected {"action":"subscribe"|"unsubscribe","symbol":"EURUSD","timeframe"?:"M1","timeframes"?:["M1","H1"]}`, json);
      return;
    }
    const m = r.data;
    const tfRaw = [...(m.timeframe !== undefined ? [m.timeframe] : []), ...(m.timeframes ?? [])];
    const tfs: Timeframe[] = [];
    for (const v of tfRaw) {
      const tf = parseTimeframe(v);
      if (!tf) {
        this.out.errorFrame(sock, 'BAD_REQUEST', `unknown timeframe ${JSON.stringify(v)}: use M1, M5, M15, M30, H1, H4, D1, W1 or MN1`, json);
        return;
      }
      if (!tfs.includes(tf)) tfs.push(tf);
    }
    const symbols = [...new Set([...(m.symbol !== undefined ? [m.symbol] : []), ...(m.symbols ?? [])])];
    for (const symbol of symbols) {
      if (sock.closed) return;
      if (m.action === 'subscribe') await this.subscribe(sock, symbol, tfs);
      else this.unsubscribe(sock, symbol, m.timeframe !== undefined || m.timeframes !== undefined ? tfs : undefined);
    }
  }

  /** A `{"action":"resume","since":"<epoch>:<seq>"}` message (pos null when its since is not valid). */
  private resumeRequest(text: string | null): { json: unknown; pos: StreamPosition | null } | null {
    if (text === null || !text.includes('"resume"')) return null;
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      return null;
    }
    if (typeof json !== 'object' || json === null || (json as { action?: unknown }).action !== 'resume') return null;
    const since = (json as { since?: unknown }).since;
    return { json, pos: typeof since === 'string' ? parseSince(since) : null };
  }

  async subscribe(sock: Sock, symbol: string, tfs: Timeframe[]): Promise<void> {
    const acc = sock.acc;
    if (!sock.quotes.has(symbol) && sock.quotes.size >= MAX_SYMBOLS_PER_SOCKET) {
      this.out.errorFrame(sock, 'BAD_REQUEST', `at most ${MAX_SYMBOLS_PER_SOCKET} symbols per socket`, { action: 'subscribe', symbol });
      return;
    }
    const server = acc.server;
    // Take the references first (so a close during the await releases them), roll back on failure.
    const newQuote = !sock.quotes.has(symbol);
    let qt: QuoteTopic;
    if (newQuote) {
      qt = this.topics.quoteTopic(server, symbol);
      qt.refs++;
      sock.quotes.set(symbol, qt);
      this.accounts.incRef(acc.symbolRefs, symbol);
    } else {
      qt = sock.quotes.get(symbol)!;
    }
    const added: string[] = [];
    for (const tf of tfs) {
      const k = `${symbol}|${tf}`;
      if (sock.candles.has(k)) continue;
      const topic = this.topics.candleTopic(server, symbol, tf);
      topic.refs++;
      // On the clock the bars are stamped with: the server's market clock (Topics.marketNow).
      sock.candles.set(k, { topic, partial: true, joinedAt: this.topics.marketNow(server) });
      this.accounts.incRef(acc.candleRefs, k);
      added.push(k);
    }
    let lastTick: Tick | null;
    if (newQuote) sock.pending.add(symbol);
    try {
      const sub = await this.deps.shards.call(acc.id, 'stream.sub', {
        accountId: acc.id, symbol, timeframes: tfs, timeoutMs: this.deps.config.streamSubscribeTimeoutMs,
      });
      this.topics.noteServer(sub.server);
      lastTick = sub.lastTick;
    } catch (err) {
      sock.pending.delete(symbol);
      if (sock.closed) return;
      const e = toApiError(err);
      if (newQuote && sock.quotes.get(symbol) === qt) {
        qt.refs--;
        sock.quotes.delete(symbol);
        this.accounts.decSymbol(acc, symbol);
      }
      for (const k of added) {
        const c = sock.candles.get(k);
        if (!c) continue;
        c.topic.refs--;
        sock.candles.delete(k);
        this.accounts.decCandle(acc, k);
      }
      this.out.errorFrame(sock, e.code, `subscribe ${symbol}: ${e.message}`, { action: 'subscribe', symbol, timeframes: tfs });
      // The account's stream is not open where it runs (its open lost, and not regained: the cluster
      // router opens it again first): nothing would ever come. The client reconnects.
      if (isNoOpenStream(e)) this.out.end(sock, 'ACCOUNT_UNAVAILABLE');
      return;
    }
    sock.pending.delete(symbol);
    if (sock.closed || sock.quotes.get(symbol) !== qt) return; // closed or unsubscribed meanwhile
    const ws = sock.ws;
    ws.cork(() => {
      const all = [...sock.candles.keys()].filter((k) => k.startsWith(`${symbol}|`)).map((k) => k.slice(symbol.length + 1));
      if (!this.out.sendControl(sock, 'SUBSCRIBED', JSON.stringify({ symbol, timeframes: all }))) return;
      if (newQuote) {
        if (!sock.coalescing) ws.subscribe(qt.key);
        else sock.leftAt.set(qt.key, -1);
        // The current quote right away: the shard's latest tick, published as new if we had not
        // seen it; else the topic's latest tick, encoded now. Not the topic's cached frame: its
        // ageMs was true when it was published, and the topic may have sat without subscribers
        // (and without ticks from the shard) for minutes since.
        if (lastTick && (!qt.lastTick || lastTick.timeMsc > qt.lastTick.timeMsc)) {
          // A subscribe's answer: a source of its own (the shard's stream may bring the same tick).
          this.topics.ingestTick({ server, tick: lastTick, source: 'subscribe' });
        } else if (qt.lastTick) {
          const srv = this.topics.servers.get(server);
          if (srv) ws.send(marketFrame('QUOTE', qt.seq, this.topics.epoch, quoteData(qt.lastTick, srv.clock, this.topics.marketNow(server))));
        }
      }
      for (const k of added) {
        const c = sock.candles.get(k);
        if (!c) continue;
        const t = c.topic;
        t.partialMembers.add(sock);
        if (!sock.coalescing) ws.subscribe(t.partialKey);
        else sock.leftAt.set(t.key, -1);
        // The bar in progress, if the topic's last update is of the current bar: a bar whose time is
        // over was last seen while nobody listened, so its end is unknown here (the shard sends the
        // current bar with its next tick).
        if (t.last && !t.last.closed && !sock.coalescing && this.topics.isCurrentBar(t, acc)) ws.send(marketFrame('CANDLE', t.seq, this.topics.epoch, candleData(t.last, true)));
      }
    });
  }

  unsubscribe(sock: Sock, symbol: string, tfs: Timeframe[] | undefined): void {
    const acc = sock.acc;
    const qt = sock.quotes.get(symbol);
    if (!qt) {
      this.out.errorFrame(sock, 'BAD_REQUEST', `not subscribed to ${symbol}`, { action: 'unsubscribe', symbol });
      return;
    }
    // Unsubscribing a timeframe that is not subscribed is an error, as for a symbol (nothing changes).
    const missing = tfs?.filter((tf) => !sock.candles.has(`${symbol}|${tf}`)) ?? [];
    if (missing.length > 0) {
      this.out.errorFrame(sock, 'BAD_REQUEST', `not subscribed to ${symbol} ${missing.join(', ')}`, { action: 'unsubscribe', symbol, timeframes: tfs });
      return;
    }
    const keys = tfs === undefined
      ? [...sock.candles.keys()].filter((k) => k.startsWith(`${symbol}|`))
      : tfs.map((tf) => `${symbol}|${tf}`);
    for (const k of keys) {
      const c = sock.candles.get(k)!;
      sock.candles.delete(k);
      c.topic.refs--;
      c.topic.partialMembers.delete(sock);
      sock.ws.unsubscribe(c.topic.key);
      sock.ws.unsubscribe(c.topic.partialKey);
      sock.leftAt.delete(c.topic.key);
      this.accounts.decCandle(acc, k);
    }
    if (tfs === undefined) {
      sock.quotes.delete(symbol);
      qt.refs--;
      sock.ws.unsubscribe(qt.key);
      sock.leftAt.delete(qt.key);
      this.accounts.decSymbol(acc, symbol);
    }
    const left = [...sock.candles.keys()].filter((k) => k.startsWith(`${symbol}|`)).map((k) => k.slice(symbol.length + 1));
    this.out.sendControl(sock, 'UNSUBSCRIBED', JSON.stringify({ symbol, timeframes: tfs ?? [], remainingTimeframes: tfs === undefined ? [] : left }));
  }
}
