// Cluster mode: which ticks reached the main thread over the relay (another node's shards, through
// NATS) rather than from this node's own shards (its accounts, or a near source). The relay marks
// what it decodes; the stream hub counts new quotes by where they came from (/metrics:
// tagw_stream_quotes_in_total), so an operator sees which path serves. A mark costs nothing to drop.
const relayed = new WeakSet<object>();

export function markRelayed(tick: object): void {
  relayed.add(tick);
}

export function isRelayed(tick: object): boolean {
  return relayed.has(tick);
}
