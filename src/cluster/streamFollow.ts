// A node listens on NATS for what its own sockets stream (docs/cluster.md "Streams"): the stream
// hub's commands for an account (open, sub, unsub, close) reach the owner through the router, and
// the events they start come back over the relay only if this node follows the account's subjects
// and the market's. The hub sends one open and one close per account however many sockets it
// has, and a sub per symbol (again when timeframes are added), so following is one reference per
// account and per (account, symbol). When this node owns the account the subscriptions stay idle
// (a node does not receive its own publications) and carry on after the account moves away.
import type { ArgsOf, CommandName, ResultOf } from '../runtime/protocol.js';
import type { StreamRelay } from './streamRelay.js';

type Relay = Pick<StreamRelay, 'follow' | 'unfollow' | 'followMarket' | 'unfollowMarket'>;

interface Followed { server: string; symbols: Set<string> }

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
          // A close counts even when it failed (the owner forgets the socket with the node).
          for (const symbol of [...(this.accounts.get(key)?.symbols ?? [])]) this.dropSymbol(key, symbol);
          if (this.accounts.delete(key)) this.relay.unfollow(key);
        }
      default: return send();
    }
  }

  private async open(key: string, send: () => Promise<ResultOf<'stream.open'>>): Promise<ResultOf<'stream.open'>> {
    // Subscribed before the owner starts sending: its first events after the open are not missed.
    const already = this.accounts.has(key);
    if (!already) await this.relay.follow(key);
    try {
      const r = await send();
      const f = this.accounts.get(key);
      if (f) f.server = r.server;
      else this.accounts.set(key, { server: r.server, symbols: new Set() });
      return r;
    } catch (err) {
      if (!already) this.relay.unfollow(key);
      throw err;
    }
  }

  private async sub(key: string, symbol: string, send: () => Promise<ResultOf<'stream.sub'>>): Promise<ResultOf<'stream.sub'>> {
    const f = this.accounts.get(key);
    const fresh = f !== undefined && !f.symbols.has(symbol);
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

  private dropSymbol(key: string, symbol: string): void {
    const f = this.accounts.get(key);
    if (f?.symbols.delete(symbol)) this.relay.unfollowMarket(f.server, symbol);
  }
}
