// One symbol's quotes arrive in several copies: every broker session of a server sees the same tick
// sequence (the assumption the relay's one publication per server and symbol rests on), and a shard,
// a node's relay and the stream hub each merge the copies of several sessions, shards or nodes.
// Comparing a copy with the last tick passed on is not enough when a millisecond holds more than one
// tick: A1 B1 A2 B2 (two sources of A then B, same ms) would pass A, B, A, B, a stale quote last
// but one. Here each source's ticks of the current millisecond are counted by content: the k-th
// copy of (bid, ask) from one source is new only if fewer than k such ticks of that millisecond
// were passed on (the same prices twice in a row from one source count once). Exact when every source delivers the sequence in order from a millisecond's start;
// a source that joins in the middle of a millisecond with several ticks can pass one of that
// millisecond out of order (the next millisecond sets it right). Pure; one per (server, symbol).

interface SourceMs {
  t: number;
  /** bid, ask pairs this source delivered at millisecond t. */
  seen: number[];
}

/** Sources not heard from for this long (ms of tick time) are forgotten at the next sweep. */
const FORGET_AFTER_MS = 60_000;

function count(pairs: number[], bid: number, ask: number): number {
  let n = 0;
  for (let i = 0; i < pairs.length; i += 2) if (pairs[i] === bid && pairs[i + 1] === ask) n++;
  return n;
}

export class TickMerge {
  private lastT = -Infinity;
  /** bid, ask pairs passed on at lastT. */
  private readonly passed: number[] = [];
  private readonly sources = new Map<string, SourceMs>();
  private sweptAt = -Infinity;

  /** Sources remembered (for tests: the forgotten ones are gone). */
  get sourceCount(): number {
    return this.sources.size;
  }

  /** Whether `source`'s copy of the tick at `t` (epoch ms) is one not passed on yet. */
  admit(source: string, t: number, bid: number, ask: number): boolean {
    if (t < this.lastT) return false;
    let s = this.sources.get(source);
    if (!s) this.sources.set(source, (s = { t, seen: [] }));
    else if (s.t !== t) {
      s.t = t;
      s.seen.length = 0;
    } else {
      // The same prices again from this source (a session re-sends its latest tick when it
      // subscribes again, or only the volume moved): nothing new for a quote.
      const n = s.seen.length;
      if (s.seen[n - 2] === bid && s.seen[n - 1] === ask) return false;
    }
    s.seen.push(bid, ask);
    if (t > this.lastT) {
      this.lastT = t;
      this.passed.length = 0;
      this.passed.push(bid, ask);
      if (t - this.sweptAt > FORGET_AFTER_MS) this.sweep(t);
      return true;
    }
    if (count(s.seen, bid, ask) <= count(this.passed, bid, ask)) return false;
    this.passed.push(bid, ask);
    return true;
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [k, s] of this.sources) if (now - s.t > FORGET_AFTER_MS) this.sources.delete(k);
  }
}
