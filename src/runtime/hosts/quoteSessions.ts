// Cluster mode, the shard side of a quote session (docs/cluster.md "Quote sessions"): a broker
// connection with a server's market-data login (QUOTE_LOGINS_FILE), of no account, opened when the
// node's sockets follow a symbol of that server and no account running on the node serves it. One
// per server and shard (the main thread sends a server's symbols to one shard); it subscribes the
// symbols wanted and forwards their ticks as a near source's (forwardTick: the shard's merge, then
// the main thread's). Closed when no symbol is wanted any more. A connection that drops or cannot
// be made is tried again with the accounts' backoff (the bridge restores its subscriptions at each
// login); a login the broker refuses (wrong password, unknown server or login) is not tried again
// while the shard runs: `stream.quote` answers ok false, and the main thread warns once and keeps
// the owners' relay. The password is read from the file when the session first logs in, and never
// goes into a log line or an answer. `stream.quoteSessions` tells the main thread each session's
// state, login (never its password), symbols and quotes received (docs/cluster.md "Quote sessions").
import type { BrokerConnection } from '../../broker/types.js';
import { BrokerAuthError, BrokerRequestError } from '../../market/brokerErrors.js';
import type { Tick } from '../../market/server.js';
import { errorMessage } from '../../util/errorMessage.js';
import { loadQuoteLogins, type QuoteLogins } from '../quoteLogins.js';
import type { Handlers, ShardContext } from './context.js';
import type { QuoteSessionState, QuoteSessionView } from './streamCommands.js';

/** The source a quote session's ticks carry into the shard's merge (never an account id). */
export const quoteSource = (server: string) => `q:${server}`;

interface Session {
  server: string;
  login: string;
  /** What the operator sees (connecting until the first login, then up or down), and since when. */
  state: QuoteSessionState;
  since: number;
  conn: BrokerConnection | undefined;
  symbols: Set<string>;
  /** Failed connects in a row (the backoff's exponent). */
  attempt: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** The first login's outcome: true logged in (or still trying after a transport failure), false refused. */
  first: Promise<boolean>;
  settle: (ok: boolean) => void;
  closed: boolean;
  off: Array<() => void>;
}

export interface QuoteSessions {
  handlers: Pick<Handlers, 'stream.quote' | 'stream.unquote' | 'stream.quoteSessions'>;
  stop(): void;
}

export function createQuoteSessions(ctx: ShardContext, forwardTick: (source: string, server: string, tick: Tick) => void): QuoteSessions {
  const sessions = new Map<string, Session>();
  /** Servers whose quote login the broker refused: not asked again while this shard runs. */
  const refused = new Map<string, { login: string; since: number }>();
  /** Quotes of followed symbols received per server while this shard runs (sessions closed and opened again add up). */
  const received = new Map<string, number>();
  const enter = (s: Session, state: QuoteSessionState) => {
    if (s.state === state) return;
    s.state = state;
    s.since = ctx.clock.now();
  };
  let logins: QuoteLogins | undefined;
  const loginOf = (server: string) => {
    const file = ctx.settings.quoteLoginsFile;
    if (!file) return undefined;
    try {
      logins ??= loadQuoteLogins(file);
    } catch (err) {
      ctx.log.warn('quote logins file not read', { err: errorMessage(err) });
      return undefined;
    }
    return logins.get(server);
  };

  const close = (s: Session) => {
    s.closed = true;
    if (s.timer) clearTimeout(s.timer);
    for (const off of s.off) off();
    void s.conn?.disconnect().catch(() => undefined);
    // Let go before its first login settled: not a refusal (a want made meanwhile is served again).
    s.settle(!refused.has(s.server));
    if (sessions.get(s.server) === s) sessions.delete(s.server);
  };

  const retry = (s: Session) => {
    if (s.closed || s.timer) return;
    const { reconnectBaseMs: base, reconnectCapMs: cap } = ctx.settings.timing;
    const max = Math.min(cap, base * 2 ** Math.min(s.attempt++, 20));
    s.timer = setTimeout(() => {
      s.timer = undefined;
      void connect(s);
    }, base + Math.random() * Math.max(0, max - base));
  };

  const connect = async (s: Session) => {
    const conn = s.conn;
    if (!conn || s.closed) return;
    try {
      await conn.connect();
      if (s.closed) return;
      s.attempt = 0;
      enter(s, 'up');
      s.settle(true);
      // The symbols wanted while it logged in (the bridge subscribed those it already had).
      if (s.symbols.size) await conn.subscribe([...s.symbols]);
    } catch (err) {
      if (s.closed) return;
      if (err instanceof BrokerAuthError || err instanceof BrokerRequestError) {
        refused.set(s.server, { login: s.login, since: ctx.clock.now() });
        s.settle(false);
        close(s);
        return;
      }
      ctx.log.debug('quote session not connected; trying again', { server: s.server, err: errorMessage(err) });
      // Not refused: the session keeps trying; meanwhile the relay serves (the main thread's watch).
      enter(s, 'down');
      s.settle(true);
      retry(s);
    }
  };

  const open = (server: string): Session | undefined => {
    const login = loginOf(server);
    if (!login || !ctx.accounts) return undefined;
    let settle!: (ok: boolean) => void;
    const first = new Promise<boolean>((r) => (settle = r));
    const s: Session = { server, login: login.login, state: 'connecting', since: ctx.clock.now(), conn: undefined, symbols: new Set(), attempt: 0, timer: undefined, first, settle, closed: false, off: [] };
    const conn = ctx.accounts.open({ server, login: login.login, password: () => loginOf(server)?.password ?? '', ...(login.platform ? { platform: login.platform } : {}) });
    s.conn = conn;
    s.off.push(conn.on('tick', (t) => {
      if (!s.symbols.has(t.symbol)) return;
      received.set(server, (received.get(server) ?? 0) + 1);
      forwardTick(quoteSource(server), server, t);
    }));
    s.off.push(conn.on('state', (c) => {
      if (s.closed) return;
      if (c.state === 'connected') enter(s, 'up');
      else if (c.state === 'disconnected') {
        enter(s, s.state === 'connecting' ? 'connecting' : 'down');
        retry(s);
      }
    }));
    sessions.set(server, s);
    void connect(s);
    return s;
  };

  return {
    handlers: {
      'stream.quote': async ({ server, symbol }) => {
        if (refused.has(server)) return { ok: false };
        const s = sessions.get(server) ?? open(server);
        if (!s) return { ok: false };
        const fresh = !s.symbols.has(symbol);
        s.symbols.add(symbol);
        if (fresh && s.conn?.state === 'connected') {
          s.conn.subscribe([symbol]).catch((err: unknown) => ctx.log.warn('quote session subscribe failed', { server, symbol, err: errorMessage(err) }));
        }
        return { ok: await s.first };
      },
      'stream.unquote': ({ server, symbol }) => {
        const s = sessions.get(server);
        if (!s || !s.symbols.delete(symbol)) return { ok: true };
        if (s.symbols.size === 0) close(s);
        else if (s.conn?.state === 'connected') {
          s.conn.unsubscribe([symbol]).catch((err: unknown) => ctx.log.debug('quote session unsubscribe failed', { server, symbol, err: errorMessage(err) }));
        }
        return { ok: true };
      },
      'stream.quoteSessions': () => {
        const out: QuoteSessionView[] = [];
        for (const s of sessions.values()) out.push({ server: s.server, login: s.login, state: s.state, sinceMs: s.since, symbols: [...s.symbols], quotes: received.get(s.server) ?? 0 });
        for (const [server, r] of refused) out.push({ server, login: r.login, state: 'refused', sinceMs: r.since, symbols: [], quotes: received.get(server) ?? 0 });
        return out;
      },
    },
    stop() {
      for (const s of [...sessions.values()]) close(s);
    },
  };
}
