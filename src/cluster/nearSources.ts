// A node's near sources (docs/cluster.md "Streams"), the I/O around NearPlan: the follower's market
// subscriptions on the relay (StreamFollower) are mirrored here, and for each followed (server,
// symbol) an account this node runs on that server subscribes the symbol at its own broker session
// (its shard's stream.source). Both copies reach the hub, whose merge sends the first: the near one
// (one process hand-off), until the node is quiet for the symbol (below). The
// accounts running here come from the node's adoptions and releases; a shard that restarted holds no
// source any more, so its accounts' sources are sent again once it is up (ShardSet.onRestart).
// While local delivery of a served symbol keeps up (NearWatch), the node tells the owners it is
// quiet for it and they withhold the relay's copies; it asks for them again (its notice without the
// symbol) as soon as their pulses show local delivery fell behind, or no local account serves it.
// A server with a market-data login (QUOTE_LOGINS_FILE) is served, where no local account is of it,
// by the node's quote session of that server (its shard's stream.quote), watched the same way; the
// sessions' states are read from their shards each second (and for /v1/status) for the operator.
import type { Logger } from '../log.js';
import type { ShardSet } from '../runtime/shardSet.js';
import { errorMessage } from '../util/errorMessage.js';
import { isQuoteSource, NearPlan, quoteSourceId, type NearCommand } from './nearPlan.js';
import { NearWatch } from './nearWatch.js';
import type { QuoteSessionStatus } from './nodeCounters.js';
import type { QuietNotice } from './quietNodes.js';
import type { StreamRelay, TickWatch } from './streamRelay.js';
import '../runtime/hosts/streamCommands.js';

export type FollowRelay = Pick<StreamRelay, 'follow' | 'unfollow' | 'followMarket' | 'unfollowMarket'>;

export interface NearSourcesOptions {
  /** This node's own shards (never the router: a source is an account running here). */
  shards: Pick<ShardSet, 'call' | 'shardFor' | 'onRestart' | 'onDeath'>;
  /** The broker server of an account (its binding), undefined when it has none. */
  serverOf: (accountId: string) => string | undefined;
  log: Logger;
  /** This node's quiet set to the owners (NATS: SUBJECTS.nearQuiet), sent again every `refreshMs`
   *  (default 1 s) while not empty, holding for three times that; absent: never quiet. */
  quiet?: { nodeId: string; announce: (notice: QuietNotice) => void; refreshMs?: number };
  /** How far (in tick time) local delivery may fall behind what the relay's pulses report before
   *  the relay's copies are asked for again (NearWatch; default 1 s). */
  graceMs?: number;
  /** Servers with a market-data login (QUOTE_LOGINS_FILE): a quote session serves their symbols no
   *  local account serves. */
  quoteServers?: ReadonlySet<string>;
}

export class NearSources {
  private readonly plan: NearPlan;
  private readonly watched: NearWatch;
  private readonly offRestart: () => void;
  private readonly offDeath: () => void;
  private readonly refresh: ReturnType<typeof setInterval> | undefined;
  /** Whether the last notice sent named any pair (an empty one is sent once, then no more). */
  private saidQuiet = false;
  /** Servers whose quote login the broker refused: warned of once. */
  private readonly refusedQuotes = new Set<string>();
  /** The quote sessions as last read from their shards (every second while there are quote logins). */
  private quotesSeen: QuoteSessionStatus[] = [];
  private quoteReads = 0;
  private readonly quotePoll: ReturnType<typeof setInterval> | undefined;

  /** The relay's tick times, to the watch; a change of the quiet set is told at once. */
  readonly watch: TickWatch = {
    local: (server, symbol, t) => {
      if (this.watched.local(server, symbol, t)) this.announce();
    },
    known: (server, symbol, t) => {
      if (this.watched.known(server, symbol, t)) this.announce();
    },
  };

  constructor(private readonly o: NearSourcesOptions) {
    this.plan = new NearPlan(o.quoteServers);
    this.watched = new NearWatch(o.graceMs);
    this.offRestart = o.shards.onRestart((shard) => this.run(this.plan.resend((id) => o.shards.shardFor(id) === shard)));
    // A dead shard delivers nothing: its sources' symbols are not quiet from now on (the owners'
    // copies again), not only once the pulses show it.
    this.offDeath = o.shards.onDeath((shard) => {
      let changed = false;
      for (const c of this.plan.resend((id) => o.shards.shardFor(id) === shard)) changed = this.watched.serve(c.server, c.symbol) || changed;
      if (changed) this.announce();
    });
    if (o.quiet) {
      this.refresh = setInterval(() => {
        if (this.saidQuiet || this.watched.quietSize > 0) this.announce();
      }, o.quiet.refreshMs ?? 1_000);
      this.refresh.unref?.();
    }
    if (o.quoteServers?.size) {
      this.quotePoll = setInterval(() => void this.quoteSessions(), 1_000);
      this.quotePoll.unref?.();
    }
  }

  /** This node's quote sessions now, read from their shards (a shard not answering: its sessions
   *  left out), sorted by server; whether the node takes a server's quotes from its session alone
   *  (up, and quiet for every symbol it follows through it) or from the owners' relay as well. */
  async quoteSessions(): Promise<QuoteSessionStatus[]> {
    const servers = this.o.quoteServers;
    if (!servers?.size) return [];
    const read = ++this.quoteReads;
    const atShard = new Map<number, string>();
    for (const server of servers) atShard.set(this.o.shards.shardFor(quoteSourceId(server)), quoteSourceId(server));
    const views = await Promise.all([...atShard.values()].map((id) => this.o.shards.call(id, 'stream.quoteSessions', {}).catch(() => [])));
    const out = views.flat().filter((v) => servers.has(v.server)).map((v): QuoteSessionStatus => {
      const symbols = (v.state === 'refused' ? this.plan.relayOnly(v.server) : v.symbols).sort();
      const alone = v.state === 'up' && symbols.length > 0 && symbols.every((symbol) => this.watched.isQuiet(v.server, symbol));
      return { server: v.server, login: v.login, state: v.state, since: new Date(v.sinceMs).toISOString(), symbols, quotes: v.quotes, quotesFrom: alone ? 'session' : 'relay' };
    }).sort((a, b) => (a.server < b.server ? -1 : a.server > b.server ? 1 : 0));
    if (read === this.quoteReads) this.quotesSeen = out;
    return out;
  }

  /** The quote sessions as last read (quoteSessions), for what must answer at once (/metrics, the heartbeat). */
  quoteSessionsSeen(): QuoteSessionStatus[] {
    return this.quotesSeen;
  }

  /** The relay as the follower uses it, with the near sources kept in step with its market subscriptions. */
  relayWith(relay: FollowRelay): FollowRelay {
    return {
      follow: (key) => relay.follow(key),
      unfollow: (key) => relay.unfollow(key),
      followMarket: (server, symbol) => {
        this.run(this.plan.want(server, symbol));
        return relay.followMarket(server, symbol);
      },
      unfollowMarket: (server, symbol) => {
        relay.unfollowMarket(server, symbol);
        this.run(this.plan.drop(server, symbol));
      },
    };
  }

  /** Accounts now running on this node's shards. */
  added(accountIds: readonly string[]): void {
    for (const id of accountIds) {
      const server = this.o.serverOf(id);
      if (server !== undefined) this.run(this.plan.added(id, server));
    }
  }

  /** Accounts that left this node (their shards dropped their sources). */
  removed(accountIds: readonly string[]): void {
    for (const id of accountIds) this.run(this.plan.removed(id));
  }

  /** Followed (server, symbol) pairs, how many of them an account or a quote session running here
   *  serves (served; quoted: a quote session), how many of those the owners' relays withhold
   *  (quiet), and how often one fell behind (stalls). */
  counts(): { wanted: number; served: number; quoted: number; quiet: number; stalls: number } {
    return { ...this.plan.counts(), quiet: this.watched.quietSize, stalls: this.watched.stalls };
  }

  /** The account serving the (server, symbol) now (undefined: the relay alone). */
  sourceOf(server: string, symbol: string): string | undefined {
    return this.plan.sourceOf(server, symbol);
  }

  stop(): void {
    this.offRestart();
    this.offDeath();
    if (this.refresh) clearInterval(this.refresh);
    if (this.quotePoll) clearInterval(this.quotePoll);
  }

  private announce(): void {
    const q = this.o.quiet;
    if (!q) return;
    const pairs = this.watched.quiet();
    this.saidQuiet = pairs.length > 0;
    q.announce({ node: q.nodeId, pairs, ttlMs: 3 * (q.refreshMs ?? 1_000) });
  }

  private run(cmds: NearCommand[]): void {
    let changed = false;
    for (const c of cmds) {
      if (isQuoteSource(c.accountId)) {
        changed = this.runQuote(c) || changed;
      } else if (c.op === 'source') {
        // A new source (or one sent again to a restarted shard): quiet only once it delivers.
        changed = this.watched.serve(c.server, c.symbol) || changed;
        this.o.shards.call(c.accountId, 'stream.source', { accountId: c.accountId, server: c.server, symbol: c.symbol }).then((r) => {
          if (!r.ok) this.run(this.plan.refused(c.accountId, c.server, c.symbol));
        }, (err: unknown) => this.o.log.warn('near source not started', { accountId: c.accountId, symbol: c.symbol, err: errorMessage(err) }));
      } else {
        this.o.shards.call(c.accountId, 'stream.unsource', { accountId: c.accountId, symbol: c.symbol })
          .catch((err: unknown) => this.o.log.warn('near source not stopped', { accountId: c.accountId, symbol: c.symbol, err: errorMessage(err) }));
      }
    }
    // Pairs no local account serves any more (let go, or their account left with none to take
    // over): the relay's copies are needed again.
    for (const [server, symbol] of this.watched.served()) {
      if (this.plan.sourceOf(server, symbol) === undefined) changed = this.watched.unserve(server, symbol) || changed;
    }
    if (changed) this.announce();
  }

  /** A quote session's command: at the shard of its plan id (the same one for every symbol of the server). */
  private runQuote(c: NearCommand): boolean {
    const { server, symbol } = c;
    if (c.op === 'unsource') {
      this.o.shards.call(c.accountId, 'stream.unquote', { server, symbol })
        .catch((err: unknown) => this.o.log.warn('quote session symbol not let go', { server, symbol, err: errorMessage(err) }));
      return false;
    }
    this.o.shards.call(c.accountId, 'stream.quote', { server, symbol }).then((r) => {
      if (r.ok) return;
      if (!this.refusedQuotes.has(server)) {
        this.refusedQuotes.add(server);
        this.o.log.warn('quote login refused by the broker (or not in QUOTE_LOGINS_FILE): this server\'s quotes come over the owners\' relay', { server });
      }
      this.run(this.plan.refused(c.accountId, server, symbol));
    }, (err: unknown) => this.o.log.warn('quote session not started', { server, symbol, err: errorMessage(err) }));
    return this.watched.serve(server, symbol);
  }
}
