// Shard events between nodes. The owner of an account publishes what its shards push (the
// gateway's onEvent hands them here as well as to its own hub): market data on
// `tagw.md.<server>.<symbol>.<kind>`, once per server and symbol however many local accounts
// (and shards) forward the same tick, and only while another node's sockets want the symbol (the
// router's ledger says: `wanted`), account events on `tagw.acct.<key>.<kind>`. A node
// subscribes only to what its sockets need, reference-counted (follow/unfollow), and delivers what
// arrives to the same onEvent path as its own shards' events. One subscription per subject and
// noEcho on the connection: every event reaches a node once.
import type { Msg, Subscription } from '@nats-io/transport-node';
import type { Logger } from '../log.js';
import { ACCOUNT_BINDING_EVENT, ACCOUNT_PHASE_EVENT } from '../runtime/hosts/accountCommands.js';
import { STREAM_EVENT } from '../runtime/hosts/streamCommands.js';
import type { ShardEvent, ShardEventKind } from '../runtime/protocol.js';
import { THREAD_STATS_EVENT } from '../runtime/threadStats.js';
import { STORAGE_EVENT } from '../runtime/storageEvent.js';
import { errorMessage } from '../util/errorMessage.js';
import { TickMerge } from '../market/tickMerge.js';
import type { NatsLink } from './natsLink.js';
import { SUBJECTS } from './subjects.js';
import { decode, encode } from './wireCodec.js';

/** An account's stream events: the owner's own shards are their only source for it. */
const ACCOUNT_STREAM_KINDS: ReadonlySet<ShardEventKind> = new Set<ShardEventKind>([
  STREAM_EVENT.positions, STREAM_EVENT.orders, STREAM_EVENT.deal, STREAM_EVENT.phase, STREAM_EVENT.rebound,
]);

/** Kinds that describe this node, not an account: never relayed. */
const LOCAL_KINDS: ReadonlySet<ShardEventKind> = new Set<ShardEventKind>([THREAD_STATS_EVENT, STORAGE_EVENT, ACCOUNT_PHASE_EVENT, ACCOUNT_BINDING_EVENT]);

export interface StreamRelayOptions {
  link: NatsLink;
  /** This node's id: the source its published ticks carry to the other nodes' merge of copies. */
  nodeId: string;
  /** Where received events go: the gateway's onEvent, as for its own shards' events. */
  onEvent: (ev: ShardEvent) => void;
  /** Whether another node's sockets want this symbol's market data (default: always). Not wanted:
   *  nothing is published (each publish costs the owner's main thread ~50 µs). */
  wanted?: (server: string, symbol: string) => boolean;
  /** Whether this node holds the account's lease: its own shards are then the account's only
   *  source, and the account's events relayed from another node are dropped (see receive). */
  holds?: (accountId: string) => boolean;
  /** Whether every node that wants the symbol's ticks said it is quiet for them (its near source
   *  keeps up: quietNodes.ts): they are withheld then, and a pulse carrying the latest one's time is
   *  published every `pulseMs` instead, so those nodes notice a near source that fell behind. */
  quietFor?: (server: string, symbol: string) => boolean;
  /** How often withheld ticks are announced by a pulse (default 500 ms). */
  pulseMs?: number;
  log: Logger;
}

export interface TickWatch {
  local(server: string, symbol: string, timeMsc: number): void;
  known(server: string, symbol: string, timeMsc: number): void;
}

/** What a pulse carries: the latest withheld tick's time of the (server, symbol). */
interface Pulse { server: string; symbol: string; t: number }

export interface RelayStats {
  published: number;
  /** Market data not published: the same as the last one of its server and symbol (another account's copy). */
  duplicates: number;
  /** Market data not published: no other node's sockets want the symbol. */
  unwanted: number;
  /** Not published: market data while NATS was down (stale by the time it would arrive), or an
   *  event NATS refused (closed connection, past the message size). */
  dropped: number;
  received: number;
  /** Received, not delivered: an account event from another node's shards for an account this node holds. */
  stale: number;
  /** Ticks not published: every node wanting them is quiet for them (served by a near source). */
  withheld: number;
  /** Pulses published (withheld ticks' latest time) and received. */
  pulses: number;
  pulsesIn: number;
}

interface Interest { refs: number; sub: Subscription }
/** A symbol's quotes of one server: their subject, and the merge of this node's shards' copies. */
interface TickSlot { subject: string; merge: TickMerge }
/** A symbol's candles of one server and timeframe: their subject, and the last one published. */
interface CandleSlot { subject: string; t: number; json: string }

/** Slots are kept per server, then key (nested: no string built per event). */
type Slots<T> = Map<string, Map<string, T>>;

/** `slot` as the slot of (server, key), returned. */
function addSlot<T>(slots: Slots<T>, server: string, key: string, slot: T): T {
  let byKey = slots.get(server);
  if (!byKey) slots.set(server, (byKey = new Map()));
  byKey.set(key, slot);
  return slot;
}

/** The market subject kind of a pulse (tagw.md.<server>.<symbol>.pulse). */
const PULSE = 'pulse';
const PULSE_SUFFIX = `.${PULSE}`;

function isMarket(ev: ShardEvent): ev is Extract<ShardEvent, { kind: typeof STREAM_EVENT.tick | typeof STREAM_EVENT.candle }> {
  return ev.kind === STREAM_EVENT.tick || ev.kind === STREAM_EVENT.candle;
}

/** nats.js (3.x) writes what `publish` queued in a microtask after the caller's turn, in one write
 *  for the whole turn. Its ProtocolHandler's flushPending writes it now (a no-op while
 *  disconnected); a version without it leaves the write to that microtask. */
function writerOf(nc: NatsLink['nc']): (() => void) | undefined {
  const protocol = (nc as unknown as { protocol?: { flushPending?: () => void } }).protocol;
  return typeof protocol?.flushPending === 'function' ? () => protocol.flushPending!() : undefined;
}

export class StreamRelay {
  readonly stats: RelayStats = { published: 0, duplicates: 0, unwanted: 0, dropped: 0, received: 0, stale: 0, withheld: 0, pulses: 0, pulsesIn: 0 };
  private readonly interests = new Map<string, Interest>();
  /** Per server, then symbol: what was published of its quotes. */
  private readonly tickSlots: Slots<TickSlot> = new Map();
  /** Per server, then symbol and timeframe: what was published of its candles. */
  private readonly candleSlots: Slots<CandleSlot> = new Map();
  private readonly writeNow: (() => void) | undefined;
  /** Market data was written at once in this turn already: the turn's later events go in nats.js's
   *  one write at its end (a shard's batch of ticks costs one write more, not one per tick). */
  private wroteThisTurn = false;
  private readonly endTurn = () => { this.wroteThisTurn = false; };

  private readonly source: string;
  /** Follower side: told the tick times seen, this node's shards' (local) and another node's
   *  (known: a relayed tick or a pulse), for its near sources' watch (nearSources.ts). */
  watch: TickWatch | undefined;
  /** Per server, then symbol: the latest withheld tick's time, until the next pulse. */
  private readonly pulsesDue: Slots<number> = new Map();
  private pulseTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly opts: StreamRelayOptions) {
    this.writeNow = writerOf(opts.link.nc);
    this.source = `n:${opts.nodeId}`;
  }

  /** Owner side: publish one event of this node's shards (called for every event; filters itself). */
  publish(ev: ShardEvent): void {
    // Market data behind some still waiting for this node's writes waits too: one symbol's events
    // (a bar's close and the next bar) must not overtake each other, or the duplicate check drops one.
    if (this.afterLocal.length > 0 && isMarket(ev)) {
      this.afterLocal.push(ev);
      return;
    }
    this.publishNow(ev);
  }

  /**
   * Owner side: market data this node's own sockets get too, published once uWS has written their
   * frames: uWS writes a turn's app.publish batch in its check handle, which libuv runs before
   * Node's immediates, so a setImmediate comes after those writes. The gateway uses it while few
   * local sockets want the symbol (ownerOrder): then the relay's NATS write (which wakes nats-server,
   * often on this very vCPU) no longer stands between the shard's tick and those sockets, for the
   * time a few socket writes take on the cross-node path. The events of one turn go out in order
   * and together (one write, as in publish).
   */
  publishAfterLocalWrites(ev: ShardEvent): void {
    this.afterLocal.push(ev);
    if (this.afterLocal.length === 1) setImmediate(this.publishWaiting);
  }

  private readonly afterLocal: ShardEvent[] = [];
  private readonly publishWaiting = () => {
    const waiting = this.afterLocal.splice(0);
    for (const ev of waiting) this.publishNow(ev);
  };

  private publishNow(ev: ShardEvent): void {
    if (LOCAL_KINDS.has(ev.kind)) return;
    const link = this.opts.link;
    let subject: string;
    let json: string;
    const market = isMarket(ev);
    if (market) {
      const symbol = ev.kind === STREAM_EVENT.tick ? ev.data.tick.symbol : ev.data.candle.symbol;
      if (ev.kind === STREAM_EVENT.tick) this.watch?.local(ev.key, symbol, ev.data.tick.timeMsc);
      if (this.opts.wanted && !this.opts.wanted(ev.key, symbol)) {
        this.stats.unwanted++;
        return;
      }
      if (ev.kind === STREAM_EVENT.tick && this.opts.quietFor?.(ev.key, symbol)) {
        this.withhold(ev.key, symbol, ev.data.tick.timeMsc);
        return;
      }
      if (!link.up) {
        this.stats.dropped++;
        return;
      }
      if (ev.kind === STREAM_EVENT.tick) {
        // One copy of each tick from this node's shards, carrying this node as its source.
        const slot = this.tickSlots.get(ev.key)?.get(symbol)
          ?? addSlot(this.tickSlots, ev.key, symbol, { subject: SUBJECTS.market(ev.key, symbol, ev.kind), merge: new TickMerge() });
        const { server, tick: q, source } = ev.data;
        if (!slot.merge.admit(source, q.timeMsc, q.bid, q.ask)) {
          this.stats.duplicates++;
          return;
        }
        subject = slot.subject;
        json = encode({ kind: ev.kind, key: ev.key, data: { server, tick: q, source: this.source } });
      } else {
        const key = `${symbol}\u0000${ev.data.candle.timeframe}`;
        const slot = this.candleSlots.get(ev.key)?.get(key)
          ?? addSlot(this.candleSlots, ev.key, key, { subject: SUBJECTS.market(ev.key, symbol, ev.kind), t: -Infinity, json: '' });
        const t = ev.data.candle.candle.time;
        json = encode(ev);
        if (t < slot.t || json === slot.json) {
          this.stats.duplicates++;
          return;
        }
        slot.t = t;
        slot.json = json;
        subject = slot.subject;
      }
    } else {
      // Account events go out even while NATS reconnects: the client buffers them until it is back.
      subject = SUBJECTS.account(ev.key, ev.kind);
      json = encode(ev);
    }
    try {
      link.nc.publish(subject, json);
      this.stats.published++;
      // Market data: the turn's first event leaves now, before the rest of the turn (the gateway
      // relays it before its own hub's fan-out: docs/cluster.md, quotes across nodes).
      if (market && this.writeNow && !this.wroteThisTurn) {
        this.wroteThisTurn = true;
        queueMicrotask(this.endTurn);
        this.writeNow();
      }
    } catch (err) {
      // Closed connection, or an event past the server's message size: never the shard-event path's problem.
      this.stats.dropped++;
      this.opts.log.warn('stream event not relayed', { kind: ev.kind, err: errorMessage(err) });
    }
  }

  private withhold(server: string, symbol: string, t: number): void {
    this.stats.withheld++;
    const due = this.pulsesDue.get(server)?.get(symbol);
    if (due === undefined) addSlot(this.pulsesDue, server, symbol, t);
    else if (t > due) this.pulsesDue.get(server)!.set(symbol, t);
    if (!this.pulseTimer) {
      this.pulseTimer = setTimeout(this.sendPulses, this.opts.pulseMs ?? 500);
      this.pulseTimer.unref?.();
    }
  }

  private readonly sendPulses = () => {
    this.pulseTimer = undefined;
    const { link } = this.opts;
    for (const [server, bySymbol] of this.pulsesDue) {
      for (const [symbol, t] of bySymbol) {
        if (!link.up) continue;
        try {
          link.nc.publish(SUBJECTS.market(server, symbol, PULSE), JSON.stringify({ server, symbol, t } satisfies Pulse));
          this.stats.pulses++;
        } catch (err) {
          this.opts.log.warn('tick pulse not published', { err: errorMessage(err) });
        }
      }
    }
    this.pulsesDue.clear();
  };

  /** Receive the events of an account (or of a gateway session handle: the /ws socket's key).
   *  Resolves once the NATS server has the interest, so what the owner publishes next arrives. */
  follow(key: string): Promise<void> {
    return this.want(SUBJECTS.accountAll(key));
  }

  unfollow(key: string): void {
    this.drop(SUBJECTS.accountAll(key));
  }

  /** Receive the quotes and candles of one symbol of a broker server. */
  followMarket(server: string, symbol: string): Promise<void> {
    return this.want(SUBJECTS.marketAll(server, symbol));
  }

  unfollowMarket(server: string, symbol: string): void {
    this.drop(SUBJECTS.marketAll(server, symbol));
  }

  /** Subjects this node receives now, with their reference counts (status, tests). */
  following(): Map<string, number> {
    return new Map([...this.interests].map(([s, i]) => [s, i.refs]));
  }

  private want(subject: string): Promise<void> {
    const have = this.interests.get(subject);
    if (have) {
      have.refs++;
      return Promise.resolve();
    }
    const sub = this.opts.link.nc.subscribe(subject, { callback: (err, msg) => this.receive(err, msg) });
    this.interests.set(subject, { refs: 1, sub });
    // While NATS is down the interest is sent on reconnect; nothing to wait for now.
    return this.opts.link.up ? this.opts.link.nc.flush().catch(() => undefined) : Promise.resolve();
  }

  private drop(subject: string): void {
    const have = this.interests.get(subject);
    if (!have) return;
    if (--have.refs > 0) return;
    have.sub.unsubscribe();
    this.interests.delete(subject);
  }

  private receive(err: Error | null, msg: Msg): void {
    if (err) return this.opts.log.warn('stream relay subscription ended', { err: errorMessage(err) });
    if (msg.subject.endsWith(PULSE_SUFFIX)) return this.receivePulse(msg);
    let ev: ShardEvent;
    try {
      ev = decode(msg.string()) as ShardEvent;
      if (typeof ev?.kind !== 'string' || typeof ev.key !== 'string') throw new Error('not a shard event');
    } catch (e) {
      return this.opts.log.warn('malformed relayed event ignored', { subject: msg.subject, err: errorMessage(e) });
    }
    this.stats.received++;
    if (ev.kind === STREAM_EVENT.tick) {
      ev.data.relayed = true; // the hub counts quotes by path
      // A node of a version before sources: all its copies as one source.
      if (typeof ev.data.source !== 'string') ev.data.source = 'n:';
      this.watch?.known(ev.key, ev.data.tick.symbol, ev.data.tick.timeMsc);
    }
    // The account's lease is this node's: another node's shards still running it (an earlier owner
    // resumed from a SIGSTOP, its broker connection delivering what it buffered meanwhile; one
    // releasing it) send what this node's own shards have or will have, or what its resync reads.
    // Numbered here, a deal already carried was a TRADE again (\`npm run chaos\`, seed 853588668).
    if (ACCOUNT_STREAM_KINDS.has(ev.kind) && this.opts.holds?.(ev.key)) {
      this.stats.stale++;
      return;
    }
    this.opts.onEvent(ev);
  }

  private receivePulse(msg: Msg): void {
    let p: Pulse;
    try {
      p = JSON.parse(msg.string()) as Pulse;
      if (typeof p?.server !== 'string' || typeof p.symbol !== 'string' || typeof p.t !== 'number') throw new Error('not a pulse');
    } catch (e) {
      return this.opts.log.warn('malformed tick pulse ignored', { subject: msg.subject, err: errorMessage(e) });
    }
    this.stats.pulsesIn++;
    this.watch?.known(p.server, p.symbol, p.t);
  }

  close(): void {
    if (this.pulseTimer) clearTimeout(this.pulseTimer);
    this.pulseTimer = undefined;
    this.pulsesDue.clear();
    this.afterLocal.length = 0;
    for (const i of this.interests.values()) i.sub.unsubscribe();
    this.interests.clear();
    this.tickSlots.clear();
    this.candleSlots.clear();
  }
}
