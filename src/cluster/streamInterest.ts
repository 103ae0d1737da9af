// On an account's owner: which node wants what of the account's stream. Each node's stream hub
// counts its own sockets and sends the owner's shard stream.open/close and stream.sub/unsub as if it
// were the only one; the shard keeps a count of opens but a *set* of symbols and timeframes, so one
// node's unsub would cut off every other node's sockets. The router passes each node's calls
// through this ledger: a sub goes to the shard as is, an unsub only for what no other node still
// wants, a node's last close (or its departure) releases what it alone wanted; the death of the
// shard's thread drops every node's holds of its accounts (the new thread has none). Given this node's id,
// it also counts which symbols some other node's sockets hold, and which nodes (wantedElsewhere,
// everyElsewhere): the owner publishes a symbol's market data on NATS only while one does, and its
// ticks only while one is not quiet for them. Pure logic.
import type { Timeframe } from '../market/timeframes.js';

/** An unsub the shard must get (timeframes absent: the whole symbol). */
export interface Unsub { symbol: string; timeframes?: Timeframe[] }

interface Origin { opens: number; symbols: Map<string, Set<Timeframe>> }

export class StreamInterest {
  /** accountId -> node -> what that node's sockets hold. */
  private readonly accounts = new Map<string, Map<string, Origin>>();
  /** symbol -> node other than `self` -> how many of its accounts here it holds the symbol on. */
  private readonly elsewhere = new Map<string, Map<string, number>>();
  /** Accounts whose every hold was closed (or forgotten) here: their shard stream is closed, and
   *  events meanwhile were not emitted. */
  private readonly closed = new Set<string>();

  /** `self`: this node's id, whose own holds wantedElsewhere does not count (none given: all count). */
  constructor(private readonly self?: string) {}

  /** Whether any other node's sockets hold the symbol on an account of this ledger. */
  wantedElsewhere(symbol: string): boolean {
    return this.elsewhere.has(symbol);
  }

  /** Whether the symbol is held elsewhere and every node holding it passes `test` (a node quiet
   *  for it: its ticks need not be relayed, quietNodes.ts). */
  everyElsewhere(symbol: string, test: (node: string) => boolean): boolean {
    const nodes = this.elsewhere.get(symbol);
    if (!nodes) return false;
    for (const node of nodes.keys()) if (!test(node)) return false;
    return true;
  }

  private count(node: string, symbol: string, d: 1 | -1): void {
    if (node === this.self) return;
    let nodes = this.elsewhere.get(symbol);
    if (!nodes) this.elsewhere.set(symbol, (nodes = new Map()));
    const n = (nodes.get(node) ?? 0) + d;
    if (n > 0) nodes.set(node, n);
    else nodes.delete(node);
    if (nodes.size === 0) this.elsewhere.delete(symbol);
  }

  private originOf(node: string, accountId: string): Origin {
    let byNode = this.accounts.get(accountId);
    if (!byNode) this.accounts.set(accountId, (byNode = new Map()));
    let o = byNode.get(node);
    if (!o) byNode.set(node, (o = { opens: 0, symbols: new Map() }));
    return o;
  }

  /** Others' wants of a symbol: null when no other node wants it, else their timeframes. */
  private others(node: string, accountId: string, symbol: string): Set<Timeframe> | null {
    let out: Set<Timeframe> | null = null;
    for (const [n, o] of this.accounts.get(accountId) ?? []) {
      if (n === node) continue;
      const tfs = o.symbols.get(symbol);
      if (!tfs) continue;
      out ??= new Set();
      for (const tf of tfs) out.add(tf);
    }
    return out;
  }

  /** A stream.open of `node` answered OK. @returns whether it reopened the account's stream, closed
   *  here by every node before (the shard emitted none of its events meanwhile). */
  open(node: string, accountId: string): boolean {
    this.originOf(node, accountId).opens++;
    return this.closed.delete(accountId);
  }

  /** A stream.sub from `node`: recorded; it goes to the shard unchanged. */
  sub(node: string, accountId: string, symbol: string, timeframes: readonly Timeframe[]): void {
    const o = this.originOf(node, accountId);
    let set = o.symbols.get(symbol);
    if (!set) {
      o.symbols.set(symbol, (set = new Set<Timeframe>()));
      this.count(node, symbol, 1);
    }
    for (const tf of timeframes) set.add(tf);
  }

  /** A stream.unsub from `node`: what the shard must let go of (null: other nodes still want all of it). */
  unsub(node: string, accountId: string, symbol: string, timeframes?: readonly Timeframe[]): Unsub | null {
    const o = this.accounts.get(accountId)?.get(node);
    const mine = o?.symbols.get(symbol);
    const dropped = timeframes === undefined ? [...(mine ?? [])] : [...timeframes];
    if (o && mine) {
      if (timeframes === undefined) {
        o.symbols.delete(symbol);
        this.count(node, symbol, -1);
      } else for (const tf of timeframes) mine.delete(tf);
    }
    const others = this.others(node, accountId, symbol);
    if (others === null) return timeframes === undefined ? { symbol } : { symbol, timeframes: [...timeframes] };
    const alone = dropped.filter((tf) => !others.has(tf));
    return alone.length ? { symbol, timeframes: alone } : null;
  }

  /** A stream.close from `node` (it goes to the shard): before it, the unsubs of what only this
   *  node wanted, once it has no open left (the shard keeps them while others hold the account). */
  close(node: string, accountId: string): Unsub[] {
    const byNode = this.accounts.get(accountId);
    const o = byNode?.get(node);
    if (!byNode || !o) return [];
    if (--o.opens > 0) return [];
    const out: Unsub[] = [];
    for (const symbol of [...o.symbols.keys()]) {
      const u = this.unsub(node, accountId, symbol);
      if (u) out.push(u);
    }
    byNode.delete(node);
    if (byNode.size === 0) {
      this.accounts.delete(accountId);
      this.closed.add(accountId);
    }
    return out;
  }

  /** A node left the cluster without closing: per account, the unsubs and the closes it owes. */
  forgetNode(node: string): Array<{ accountId: string; unsubs: Unsub[]; closes: number }> {
    const out: Array<{ accountId: string; unsubs: Unsub[]; closes: number }> = [];
    for (const [accountId, byNode] of [...this.accounts]) {
      const o = byNode.get(node);
      if (!o) continue;
      const closes = o.opens;
      o.opens = 1;
      out.push({ accountId, unsubs: this.close(node, accountId), closes });
    }
    return out;
  }

  /** What `node` holds of the account's stream now (undefined: nothing). */
  holding(node: string, accountId: string): { opens: number; symbols: Array<[string, Timeframe[]]> } | undefined {
    const o = this.accounts.get(accountId)?.get(node);
    if (!o || (o.opens <= 0 && o.symbols.size === 0)) return undefined;
    return { opens: o.opens, symbols: [...o.symbols].map(([s, tfs]) => [s, [...tfs]]) };
  }

  /** The thread of the shard running these accounts died: its new thread holds no open or sub of
   *  any node. Every node's holds of them go, and each counts as closed (the first open again is a
   *  reopen: its events since were not emitted). @returns per node, the accounts it held some of
   *  (which it must open again, if it still holds them). */
  shardLost(lost: (accountId: string) => boolean): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const [accountId, byNode] of [...this.accounts]) {
      if (!lost(accountId)) continue;
      for (const node of byNode.keys()) {
        const ids = out.get(node);
        if (ids) ids.push(accountId);
        else out.set(node, [accountId]);
      }
      this.dropAccount(accountId);
      this.closed.add(accountId);
    }
    return out;
  }

  /** The account moved to another owner: its shard here let go of everything. */
  dropAccount(accountId: string): void {
    for (const [node, o] of this.accounts.get(accountId) ?? []) for (const symbol of o.symbols.keys()) this.count(node, symbol, -1);
    this.accounts.delete(accountId);
    this.closed.delete(accountId);
  }
}
