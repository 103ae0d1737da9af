// Whether this node's near sources keep up (docs/cluster.md "Streams", quiet relays). A symbol a
// near source serves here need not come from the owner's relay as well: while local delivery keeps
// up, the node tells the owners it is quiet for that (server, symbol) and they withhold their copies
// of its ticks, sending a pulse instead (the latest tick time they had, a few times a second). The
// watch compares the tick times both sides saw (broker times of one server's feed: comparable
// across nodes, no clock involved): quiet once local delivery has caught up with everything known
// from the relay; no longer quiet once the owner knows a tick more than `graceMs` newer than the
// latest delivered here (the session stopped delivering while staying up, the shard died, ...), so
// the relay's copies come again. Pure logic.

interface Entry { near: number; known: number; quiet: boolean }

export class NearWatch {
  /** server -> symbol -> entry (nested: no key built per tick). */
  private readonly entries = new Map<string, Map<string, Entry>>();
  private quietCount = 0;
  /** Times a quiet symbol was found behind (its relay copies asked for again). */
  stalls = 0;

  constructor(private readonly graceMs = 1_000) {}

  /** A local account serves the (server, symbol) from now on (a new source, or one sent again to a
   *  restarted shard): not quiet until it delivers. */
  serve(server: string, symbol: string): boolean {
    let bySymbol = this.entries.get(server);
    if (!bySymbol) this.entries.set(server, (bySymbol = new Map()));
    const was = bySymbol.get(symbol);
    bySymbol.set(symbol, { near: -Infinity, known: was?.known ?? -Infinity, quiet: false });
    return this.unquiet(was);
  }

  /** No local account serves it any more (or it is no longer followed). @returns whether the quiet set changed. */
  unserve(server: string, symbol: string): boolean {
    const bySymbol = this.entries.get(server);
    const was = bySymbol?.get(symbol);
    if (!bySymbol || !was) return false;
    bySymbol.delete(symbol);
    if (bySymbol.size === 0) this.entries.delete(server);
    return this.unquiet(was);
  }

  /** A tick of this node's own shards. @returns whether the quiet set changed. */
  local(server: string, symbol: string, timeMsc: number): boolean {
    const e = this.entries.get(server)?.get(symbol);
    if (!e) return false;
    if (timeMsc > e.near) e.near = timeMsc;
    if (e.quiet || e.near < e.known) return false;
    e.quiet = true;
    this.quietCount++;
    return true;
  }

  /** A tick time known elsewhere: a relayed tick, or an owner's pulse. @returns whether the quiet set changed. */
  known(server: string, symbol: string, timeMsc: number): boolean {
    const e = this.entries.get(server)?.get(symbol);
    if (!e) return false;
    if (timeMsc > e.known) e.known = timeMsc;
    if (!e.quiet || e.known - e.near <= this.graceMs) return false;
    e.quiet = false;
    this.quietCount--;
    this.stalls++;
    return true;
  }

  /** The (server, symbol) pairs whose relay copies this node does not need now. */
  quiet(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    if (this.quietCount === 0) return out;
    for (const [server, bySymbol] of this.entries) for (const [symbol, e] of bySymbol) if (e.quiet) out.push([server, symbol]);
    return out;
  }

  /** Whether the node is quiet for the (server, symbol) now. */
  isQuiet(server: string, symbol: string): boolean {
    return this.entries.get(server)?.get(symbol)?.quiet ?? false;
  }

  get quietSize(): number {
    return this.quietCount;
  }

  /** The pairs watched (served by a local account). */
  served(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const [server, bySymbol] of this.entries) for (const symbol of bySymbol.keys()) out.push([server, symbol]);
    return out;
  }

  private unquiet(was: Entry | undefined): boolean {
    if (!was?.quiet) return false;
    this.quietCount--;
    return true;
  }
}
