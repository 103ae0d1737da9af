// Which of this node's accounts serves as the near source of which (server, symbol) (docs/cluster.md
// "Streams"). The node's sockets follow symbols of accounts other nodes own (StreamFollower: the
// owner's relay); where an account running here is on the same server, that account's broker
// session subscribes the symbol too, and the first of the two copies to arrive is the one the hub
// sends. This counts the wants (one per followed account and symbol, as the relay's subscriptions),
// keeps one serving account per wanted (server, symbol) while the node runs one on that server, and
// says which shard commands follow from each change: `source` at an account (it subscribes the
// symbol), `unsource` (it lets go). An account that leaves the node (its lease moved, released) lets
// go by itself (its shard drops it); a refused source (the account runs on another server now, or
// no longer here) is not asked again until the account comes back. A server with a market-data login
// (QUOTE_LOGINS_FILE) has one more source, after the local accounts: the node's quote session of that
// server (`quoteSourceId`), which the NearSources start at a shard with the login's credentials; a
// want it serves stays there while it serves (an account adopted later takes only unserved ones).
// Pure logic.

export interface NearCommand { op: 'source' | 'unsource'; accountId: string; server: string; symbol: string }

interface Want { server: string; symbol: string; refs: number; at: string | undefined }

const wantKey = (server: string, symbol: string) => `${server}\u0000${symbol}`;

/** The plan's name of a server's quote session (a NUL first: no account id looks like it). */
const QUOTE = '\u0000quote:';
export const quoteSourceId = (server: string) => `${QUOTE}${server}`;
export const isQuoteSource = (id: string) => id.startsWith(QUOTE);

export class NearPlan {
  /** Accounts running on this node -> their server (as their binding says). */
  private readonly local = new Map<string, string>();
  private readonly wants = new Map<string, Want>();
  /** account -> wants (keys) it refused. */
  private readonly refusals = new Map<string, Set<string>>();

  /** `quoteServers`: the servers with a market-data login (their quote session serves what no local account does). */
  constructor(private readonly quoteServers: ReadonlySet<string> = new Set()) {}

  /** One more follower of the symbol. */
  want(server: string, symbol: string): NearCommand[] {
    const k = wantKey(server, symbol);
    const w = this.wants.get(k);
    if (w) {
      w.refs++;
      return [];
    }
    const fresh: Want = { server, symbol, refs: 1, at: undefined };
    this.wants.set(k, fresh);
    return this.assign(k, fresh);
  }

  /** One follower fewer; the last one lets go of the source. */
  drop(server: string, symbol: string): NearCommand[] {
    const k = wantKey(server, symbol);
    const w = this.wants.get(k);
    if (!w || --w.refs > 0) return [];
    this.wants.delete(k);
    for (const r of this.refusals.values()) r.delete(k);
    return w.at === undefined ? [] : [{ op: 'unsource', accountId: w.at, server, symbol }];
  }

  /** An account runs on this node now (adopted), on `server`. */
  added(accountId: string, server: string): NearCommand[] {
    this.local.set(accountId, server);
    this.refusals.delete(accountId);
    const out: NearCommand[] = [];
    for (const [k, w] of this.wants) if (w.at === undefined && w.server === server) out.push(...this.assign(k, w));
    return out;
  }

  /** An account left this node (its shard dropped what it held): its symbols go to another account. */
  removed(accountId: string): NearCommand[] {
    if (!this.local.delete(accountId)) return [];
    this.refusals.delete(accountId);
    return this.reassign((w) => w.at === accountId);
  }

  /** The account's shard refused the source (not running there, or on another server). */
  refused(accountId: string, server: string, symbol: string): NearCommand[] {
    const k = wantKey(server, symbol);
    const w = this.wants.get(k);
    if (!w || w.at !== accountId) return [];
    let r = this.refusals.get(accountId);
    if (!r) this.refusals.set(accountId, (r = new Set()));
    r.add(k);
    return this.reassign((x) => x === w);
  }

  /** The sources of the accounts `of` names again (their shard restarted: it holds none of them). */
  resend(of: (accountId: string) => boolean): NearCommand[] {
    const out: NearCommand[] = [];
    for (const w of this.wants.values()) if (w.at !== undefined && of(w.at)) out.push({ op: 'source', accountId: w.at, server: w.server, symbol: w.symbol });
    return out;
  }

  /** What serves the (server, symbol) now (undefined: only the relay). */
  sourceOf(server: string, symbol: string): string | undefined {
    return this.wants.get(wantKey(server, symbol))?.at;
  }

  /** The server's wanted symbols no local source serves (the relay alone). */
  relayOnly(server: string): string[] {
    const out: string[] = [];
    for (const w of this.wants.values()) if (w.server === server && w.at === undefined) out.push(w.symbol);
    return out;
  }

  /** Wanted symbols, how many of them a local source serves (an account or a quote session), and
   *  how many of those a quote session. */
  counts(): { wanted: number; served: number; quoted: number } {
    let served = 0;
    let quoted = 0;
    for (const w of this.wants.values()) {
      if (w.at === undefined) continue;
      served++;
      if (isQuoteSource(w.at)) quoted++;
    }
    return { wanted: this.wants.size, served, quoted };
  }

  private reassign(which: (w: Want) => boolean): NearCommand[] {
    const out: NearCommand[] = [];
    for (const [k, w] of this.wants) {
      if (!which(w)) continue;
      w.at = undefined;
      out.push(...this.assign(k, w));
    }
    return out;
  }

  /** The first local account on the want's server that has not refused it (insertion order: the
   *  earliest adopted, so a want stays where it is while its account stays); else the server's
   *  quote session, unless it refused. */
  private assign(k: string, w: Want): NearCommand[] {
    for (const [id, server] of this.local) {
      if (server !== w.server || this.refusals.get(id)?.has(k)) continue;
      w.at = id;
      return [{ op: 'source', accountId: id, server: w.server, symbol: w.symbol }];
    }
    const q = quoteSourceId(w.server);
    if (!this.quoteServers.has(w.server) || this.refusals.get(q)?.has(k)) return [];
    w.at = q;
    return [{ op: 'source', accountId: q, server: w.server, symbol: w.symbol }];
  }
}
