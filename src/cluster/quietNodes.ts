// On an owner: which nodes said they need no relayed ticks of a (server, symbol), their near source
// keeping up (nearWatch.ts). Each node sends its whole quiet set when it changes and again every
// second; a set replaces the node's last one and holds for its ttl only, so a node that stopped
// saying so (gone, cut off, its message lost) is relayed to again once the ttl has passed. Pure
// logic: time comes from the caller.

/** However long a node asks: a set it stopped renewing is over within a minute. */
const MAX_TTL_MS = 60_000;

interface NodeQuiet { until: number; pairs: Map<string, Set<string>> }

export interface QuietNotice { node: string; pairs: Array<[string, string]>; ttlMs: number }

export class QuietNodes {
  private readonly nodes = new Map<string, NodeQuiet>();

  /** A node's quiet set, received at `now`. */
  apply(n: QuietNotice, now: number): void {
    if (n.pairs.length === 0) {
      this.nodes.delete(n.node);
      return;
    }
    const pairs = new Map<string, Set<string>>();
    for (const [server, symbol] of n.pairs) {
      let s = pairs.get(server);
      if (!s) pairs.set(server, (s = new Set()));
      s.add(symbol);
    }
    this.nodes.set(n.node, { until: now + Math.min(n.ttlMs, MAX_TTL_MS), pairs });
  }

  /** Whether no node is quiet for anything (the per-tick check's fast path). */
  get empty(): boolean {
    return this.nodes.size === 0;
  }

  /** Whether `node` is quiet for the (server, symbol) at `now`. */
  has(node: string, server: string, symbol: string, now: number): boolean {
    const q = this.nodes.get(node);
    if (!q) return false;
    if (q.until <= now) {
      this.nodes.delete(node);
      return false;
    }
    return q.pairs.get(server)?.has(symbol) ?? false;
  }

}

/** A quiet notice as received over NATS, or undefined when it is not one. */
export function parseQuietNotice(v: unknown): QuietNotice | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const { node, pairs, ttlMs } = v as Record<string, unknown>;
  if (typeof node !== 'string' || typeof ttlMs !== 'number' || !(ttlMs > 0) || !Array.isArray(pairs)) return undefined;
  const ok = pairs.every((p) => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string');
  return ok ? { node, pairs: pairs as Array<[string, string]>, ttlMs } : undefined;
}
