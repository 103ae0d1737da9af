// A node listens on NATS for what its own sockets stream (docs/cluster.md "Streams"): the stream
// hub's commands for an account (open, sub, unsub, close) reach the owner through the router, and
// the events they start come back over the relay only if this node follows the account's subjects
// and the market's. Like the owner's shard, this counts the hub's opens of an account (one per
// socket, and one for a stream held for resume after its last socket) and keeps a set of its
// symbols (a sub per socket's subscribe, an unsub once no socket wants the symbol): the account
// is followed from its first open to its last close, a symbol from its first sub to its unsub.
// When this node owns the account the subscriptions stay idle (a node does not receive its own
// publications) and carry on after the account moves away.
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { StreamRelay } from './streamRelay.js';

type Relay = Pick<StreamRelay, 'follow' | 'unfollow' | 'followMarket' | 'unfollowMarket'>;

interface Followed { server: string; opens: number; symbols: Set<string> }

export class StreamFollower {
  private readonly accounts = new Map<string, Followed>();
  constructor(private readonly relay: Relay) {}

  /** Runs `send` (the command sent to the owner) with this node's subscriptions kept in step. */
  async call<C extends CommandName>(key: string, op: C, args: ArgsOf<C>, send: () => Promise<ResultOf<C>>): Promise<ResultOf<C>> {
    switch (op) {
      case 'stream.open': return this.open(key, send as () => Promise<ResultOf<'stream.open'>>) as Promise<ResultOf<C>>;
      case 'stream.sub': return this.sub(key, (args as ArgsOf<'stream.sub'>).symbol, send as () => Promise<ResultOf<'stream.sub'>>) as Promise<ResultOf<C>>;
      case 'stream.unsub': {
        const r = await send();
        const { symbol, timeframes } = args as ArgsOf<'stream.unsub'>;
        // Only timeframes dropped: the symbol's quotes still flow, on the same subject.
        if (!timeframes || timeframes.length === 0) this.dropSymbol(key, symbol);
        return r;
      }
      case 'stream.close':
        try {
          return await send();
        } finally {
          // A close counts even when it failed (as the router counts it: nothing unwanted is reopened).
          this.release(key);
        }
      default: return send();
    }
  }

  private async open(key: string, send: () => Promise<ResultOf<'stream.open'>>): Promise<ResultOf<'stream.open'>> {
    // Counted and subscribed before the owner starts sending: its first events are not missed, and
    // a close of another open meanwhile does not drop the subscription.
    let f = this.accounts.get(key);
    if (f) f.opens++;
    else {
      this.accounts.set(key, (f = { server: '', opens: 1, symbols: new Set() }));
      await this.relay.follow(key);
    }
    try {
      const r = await send();
      f.server = r.server;
      return r;
    } catch (err) {
      this.release(key);
      throw err;
    }
  }

  private async sub(key: string, symbol: string, send: () => Promise<ResultOf<'stream.sub'>>): Promise<ResultOf<'stream.sub'>> {
    const f = this.accounts.get(key);
    const fresh = f !== undefined && f.server !== '' && !f.symbols.has(symbol);
    if (fresh) {
      f.symbols.add(symbol);
      await this.relay.followMarket(f.server, symbol);
    }
    try {
      return await send();
    } catch (err) {
      if (fresh) this.dropSymbol(key, symbol);
      throw err;
    }
  }

  /** The hub let go of its opens of the account without closing them (the shard's thread died under
   *  them: Shards.opensLost): none is counted here any more, and its subscriptions go. */
  forget(key: string): void {
    this.drop(key);
  }

  /** One open fewer; the last one takes the account's and its symbols' subscriptions with it. */
  private release(key: string): void {
    const f = this.accounts.get(key);
    if (f && --f.opens <= 0) this.drop(key);
  }

  /** The account's and its symbols' subscriptions go, whatever its opens. */
  private drop(key: string): void {
    const f = this.accounts.get(key);
    if (!f) return;
    for (const symbol of [...f.symbols]) this.dropSymbol(key, symbol);
    this.accounts.delete(key);
    this.relay.unfollow(key);
  }

  private dropSymbol(key: string, symbol: string): void {
    const f = this.accounts.get(key);
    if (f?.symbols.delete(symbol)) this.relay.unfollowMarket(f.server, symbol);
  }
}
