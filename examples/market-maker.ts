// A small market-making bot on tagw/client: quotes in, orders out, positions reconciled whenever
// the stream says continuity was lost (RESUMED recovered:false). Not a strategy worth money: it
// keeps one BuyLimit below the bid and one SellLimit above the ask, re-quoting when the price moves,
// within a position limit.
//
//   TAGW_URL=http://127.0.0.1:8080 TAGW_KEY=... TAGW_ACCOUNT=... node --import tsx examples/market-maker.ts
//
// Optional: SYMBOL (BTCUSD), LOTS (0.01), MAX_POSITION (0.05 lots net), RUN_SECONDS (20; 0 = until Ctrl-C).
// In your own project: import { TagwClient } from 'tagw/client'.
import WebSocket from 'ws';
import { IdempotencyUncertainError, TagwClient, TagwError, type Quote, type StreamOrderRow, type StreamPositionRow } from '../src/client/index.js';

const MAGIC = 7001; // marks this bot's orders among the account's others
const CANCEL_RETRY_MS = 250;

export interface MarketMakerOptions {
  baseUrl?: string;
  apiKey?: string;
  /** Or a client of your own (your retry settings, your WebSocket); baseUrl and apiKey are then unused. */
  client?: TagwClient;
  accountId: string;
  symbol?: string;
  lots?: number;
  maxPosition?: number;
  /** No stream frame for this long and the SDK replaces the connection (default 25 s). */
  heartbeatTimeoutMs?: number;
  /** Stop after this long (ms); 0: until stop() is called. */
  runMs?: number;
  /** After the stop, how long it goes on trying to cancel its orders (default 10 s): the broker
   *  refuses to cancel a pending order within its freeze level of the market until the price moves away. */
  cancelWithinMs?: number;
  log?: (msg: string, data?: object) => void;
}

export interface MarketMakerSummary {
  quotes: number;
  requotes: number;
  ordersPlaced: number;
  /** Orders the broker refused (a limit the market ran through before it arrived). */
  refused: number;
  fills: number;
  reconciles: number;
  netLots: number;
}

export async function runMarketMaker(o: MarketMakerOptions, stopSignal?: AbortSignal): Promise<MarketMakerSummary> {
  const symbol = o.symbol ?? 'BTCUSD';
  const lots = o.lots ?? 0.01;
  const maxPosition = o.maxPosition ?? 0.05;
  const log = o.log ?? ((m, d) => console.log(JSON.stringify({ msg: m, ...d })));
  const client = o.client ?? new TagwClient({ baseUrl: o.baseUrl ?? 'http://127.0.0.1:8080', apiKey: o.apiKey, WebSocket });
  const acct = client.account(o.accountId);
  const info = (await acct.SymbolParams({ symbol })).symbolInfo;
  // Quote this far outside the touch: the broker's minimum distance for pending orders, and a spread.
  const offset = Math.max(info.stopsLevel, info.spread, 10) * info.point * 2;
  const round = (p: number) => Number(p.toFixed(info.digits));

  const summary: MarketMakerSummary = { quotes: 0, requotes: 0, ordersPlaced: 0, refused: 0, fills: 0, reconciles: 0, netLots: 0 };
  let positions: StreamPositionRow[] = [];
  let pending: StreamOrderRow[] = [];
  /** Where the market was at the last re-quote (null: quote from scratch). */
  const last: { quoted: { bid: number; ask: number } | null } = { quoted: null };
  let busy = false;

  const mine = <T extends { magic: number; symbol: string }>(rows: T[]) => rows.filter((r) => r.magic === MAGIC && r.symbol === symbol);
  const net = () => mine(positions).reduce((n, p) => n + (p.type === 'Buy' ? p.volume : -p.volume), 0);

  /** The account as the gateway has it now: after recovered:false, events were missed. */
  const reconcile = async (why: string) => {
    summary.reconciles++;
    const open = await acct.OpenedOrders();
    positions = open.filter((r) => r.kind === 'position') as unknown as StreamPositionRow[];
    pending = open.filter((r) => r.kind === 'order').map((r) => ({ ...r, price: r.openPrice })) as unknown as StreamOrderRow[];
    last.quoted = null;
    log('reconciled', { why, netLots: net(), pending: mine(pending).length });
  };

  const place = async (operation: 'BuyLimit' | 'SellLimit', price: number) => {
    try {
      await acct.OrderSend({ symbol, operation, volume: lots, price: round(price), magic: MAGIC, comment: 'mm' });
      summary.ordersPlaced++;
    } catch (e) {
      // The gateway cannot say whether it was placed: look before quoting again.
      if (e instanceof IdempotencyUncertainError) await reconcile(e.nextStep);
      // No answer after every try (TIMEOUT, NETWORK_ERROR: status 0): it may have been placed. The
      // book says; sending it again with e.clientOrderId would be safe too (the gateway replays).
      else if (e instanceof TagwError && e.status === 0) await reconcile(`no answer (${e.code}) for ${e.clientOrderId}: it may have been placed`);
      else {
        // A limit the market has run through meanwhile is refused by the broker (TRADE_REQUEST_ERROR,
        // reason INVALID_PRICE): the next quote re-prices it.
        summary.refused++;
        log('order refused', { operation, code: (e as { code?: string }).code, error: (e as Error).message });
      }
    }
  };

  const requote = async (q: Quote) => {
    busy = true;
    try {
      for (const p of mine(pending)) await acct.OrderDelete({ ticket: p.ticket }).catch(() => undefined);
      const n = net();
      if (n + lots <= maxPosition + 1e-9) await place('BuyLimit', q.bid - offset);
      if (n - lots >= -maxPosition - 1e-9) await place('SellLimit', q.ask + offset);
      last.quoted = { bid: q.bid, ask: q.ask };
      if (summary.requotes++ === 0) log('quoting', { symbol, bid: q.bid, ask: q.ask, offset });
    } finally {
      busy = false;
    }
  };

  const stream = client.stream(o.accountId, { symbols: [symbol], ...(o.heartbeatTimeoutMs ? { heartbeatTimeoutMs: o.heartbeatTimeoutMs } : {}) });
  stream.on('POSITIONS', (f) => (positions = f.data.positions));
  stream.on('ORDERS', (f) => (pending = f.data.orders));
  stream.on('TRADE', (f) => {
    if (f.data.magic === MAGIC) summary.fills++;
    log('fill', { ticket: f.data.ticket, type: f.data.type, volume: f.data.volume, price: f.data.price });
  });
  stream.onEvent('resync', (r) => void reconcile(r.reason ?? 'the gateway could not replay what was missed').catch((e: unknown) => log('reconcile failed', { error: String(e) })));
  stream.onEvent('state', (s, d) => s === 'reconnecting' && log('stream reconnecting', d ?? {}));

  const stopAt = o.runMs ? Date.now() + o.runMs : Infinity;
  try {
    for await (const f of stream) {
      if (stopSignal?.aborted || Date.now() >= stopAt) break;
      if (f.type !== 'QUOTE') continue;
      summary.quotes++;
      const q = f.data;
      // Re-quote when the market moved by half the offset (or nothing is quoted yet); one at a time.
      const at = last.quoted;
      const moved = !at || Math.abs(q.bid - at.bid) > offset / 2 || Math.abs(q.ask - at.ask) > offset / 2;
      if (moved && !busy) await requote(q);
    }
  } finally {
    stream.close();
    // The book as the gateway has it, not as the stream last told it: the ORDERS frame of an order
    // placed just before the stop may not have arrived, and that order would be left working.
    // A delete that fails (an order within the broker's freeze level, the broker reconnecting, a
    // 503) is tried again a moment later, until the book is empty or cancelWithinMs has passed.
    const giveUpAt = Date.now() + (o.cancelWithinMs ?? 10_000);
    let failed = false;
    for (;;) {
      if (failed) await new Promise((r) => setTimeout(r, CANCEL_RETRY_MS));
      const open = await acct.OpenedOrders().catch(() => null);
      const book = mine(open ? (open.filter((r) => r.kind === 'order') as unknown as StreamOrderRow[]) : pending);
      if (open && book.length === 0) break;
      if (Date.now() >= giveUpAt) {
        log('orders left working', { tickets: book.map((p) => p.ticket) });
        break;
      }
      failed = !open;
      for (const p of book) {
        await acct.OrderDelete({ ticket: p.ticket }).catch((e: unknown) => {
          failed = true;
          log('cancel failed', { ticket: p.ticket, code: (e as { code?: string }).code, error: (e as Error).message });
        });
      }
    }
  }
  summary.netLots = Number(net().toFixed(8));
  return summary;
}

// Run from the command line.
if (process.argv[1] && import.meta.url === new URL(process.argv[1], 'file://').href) {
  const fail = (why: string): never => { console.error(`market-maker: ${why}`); process.exit(1); };   // one line, not a stack
  const env = (k: string, d?: string) => process.env[k] ?? d
    ?? fail(`set ${k} (and TAGW_ACCOUNT): eval "$(node --import tsx examples/tour.ts)" sets both, or see the comment at the top of examples/market-maker.ts`);
  const ctrl = new AbortController();
  process.once('SIGINT', () => ctrl.abort());
  const baseUrl = env('TAGW_URL', 'http://127.0.0.1:8080');
  const summary = await runMarketMaker({
    baseUrl, apiKey: env('TAGW_KEY'), accountId: env('TAGW_ACCOUNT'),
    symbol: env('SYMBOL', 'BTCUSD'), lots: Number(env('LOTS', '0.01')), maxPosition: Number(env('MAX_POSITION', '0.05')),
    runMs: Number(env('RUN_SECONDS', '20')) * 1000,
  }, ctrl.signal).catch((e: unknown) => {
    if (!(e instanceof TagwError)) throw e;
    return fail(e.code === 'NETWORK_ERROR' ? `no gateway answers at ${baseUrl} (NETWORK_ERROR): is it running, and is TAGW_URL its address?` : `${e.status} ${e.code}: ${e.message}`);
  });
  console.log(JSON.stringify({ msg: 'done', ...summary }));
}
