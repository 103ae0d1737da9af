// What the chaos runs (test/chaos/*.chaos.ts, `npm run chaos`) check after each schedule, the
// cluster's and the single node's alike: the SDK's stream of an account followed through the faults
// (watchStream), every accepted order's TRADE once on it and its last positions and orders the
// broker's (checkStreams), each login's whole history against the broker's book with only 200 or 409
// IDEMPOTENCY_UNCERTAIN as final answers, clean 503s and no hung request (checkLedgers), and the
// schedule's numbers (summarize).
import { expect } from 'vitest';
import WebSocket from 'ws';
import { TagwClient } from '../../src/client/index.js';
import { loadSimConfig } from '../../src/sim/config.js';
import { SIM_SERVERS, type ClusterAccount, type SimServer } from './clusterProcs.js';
import { acceptableFinal, unclean503, type Answer } from './clusterTraffic.js';
import { assertBook, type BrokerBook } from './orderLedger.js';
import { until } from './until.js';

const SIM = loadSimConfig();
/** BTCUSD's spread in points on `server`, as its quotes carry it (the typical spread -1..+2,
 *  src/sim/feed.ts): the two servers' ranges do not meet, so a quote of the other server shows. */
function spreadOf(server: SimServer): { min: number; max: number; point: number } {
  const sym = SIM.servers.find((s) => s.name === server)!.symbols.find((x) => x.name === 'BTCUSD')!;
  return { min: sym.spread - 1, max: sym.spread + 2, point: 10 ** -sym.digits };
}

/** The time of day to the ms, for CHAOS_DEBUG's frame log. */
export const now = () => new Date().toISOString().slice(11, 23);

/** The requests of one client side: every attempt, and each id's final answer. */
export interface History { readonly log: Answer[]; readonly finals: Answer[] }

/** The SDK's stream of an account at `baseUrl` (a balancer over the nodes, or a proxy to the one
 *  gateway), subscribed to BTCUSD, from its first snapshot (P5; P4 sends none) and quote on: the
 *  TRADE of each order and close (the comment is its clientOrderId), when it said continuity was lost
 *  (resync), when each quote came, and the quotes whose spread is not its server's. */
export async function watchStream(acct: ClusterAccount, baseUrl: string) {
  const stream = new TagwClient({ baseUrl, apiKey: acct.key, WebSocket }).stream(acct.id, { symbols: ['BTCUSD'] });
  const trades = new Map<string, number>();
  const quotes: number[] = [];
  const foreignQuotes: string[] = [];
  const spread = spreadOf(acct.server);
  stream.on('QUOTE', (f) => {
    quotes.push(Date.now());
    const pts = Math.round((f.data.ask - f.data.bid) / spread.point);
    if (f.data.symbol !== 'BTCUSD' || pts < spread.min || pts > spread.max) foreignQuotes.push(`${f.data.symbol} ${f.data.bid}/${f.data.ask} (${pts} points)@${now()}`);
  });
  const resyncs: number[] = [];
  const errors: string[] = [];
  let snapshot = false;
  // What the stream says the account holds now: the last POSITIONS and (P5) ORDERS frames, each
  // the whole list.
  let positions: string[] | undefined;
  let orders: string[] | undefined;
  /** Since the SDK's own re-sync of a P4 stream, no POSITIONS (the positions are not known). */
  let unknownSince = false;
  stream.on('POSITIONS', (f) => {
    snapshot = true;
    unknownSince = false;
    positions = f.data.positions.map((p) => `#${p.ticket}`).sort();
  });
  stream.on('ORDERS', (f) => {
    orders = f.data.orders.map((o) => `#${o.ticket}@${o.price}`).sort();
  });
  stream.on('TRADE', (f) => trades.set(f.data.comment, (trades.get(f.data.comment) ?? 0) + 1));
  // For CHAOS_DEBUG: each frame's type and seq (a TRADE's order id too), and the socket's states.
  const frames: string[] = [];
  stream.on('*', (f) => f.type !== 'QUOTE' && frames.push(`${f.type}${'seq' in f && f.seq !== undefined ? `:${f.epoch ?? ''}:${f.seq}` : ''}${f.type === 'TRADE' ? `(${f.data.comment})` : f.type === 'ERROR' ? `(${f.data.error}: ${f.data.message})` : ''}@${now()}`));
  stream.onEvent('state', (st, info) => frames.push(`[${st}${info?.code ? ` ${info.code}` : ''}]@${now()}`));
  // A P4 stream that reconnected with no position to resume from (its socket had no account frame
  // yet) is re-synced by the SDK itself, and gets no POSITIONS until the account's next change:
  // SPEC §6 sends the snapshot after connecting on P5 only (docs/stream.md). What it held before is
  // no longer vouched for; the client reads /OpenedOrders then (as the SDK's resync says).
  stream.onEvent('resync', (r) => {
    if (r.synthetic && SIM_SERVERS[acct.server] === 'P4') {
      positions = undefined;
      unknownSince = true;
    }
    resyncs.push(Date.now());
    frames.push(`RESYNC(${r.synthetic ? `sdk: ${r.reason ?? ''}` : 'recovered:false'})@${now()}`);
  });
  stream.onEvent('error', (e) => errors.push(e.message));
  await until(() => (snapshot || SIM_SERVERS[acct.server] === 'P4') && quotes.length > 0, `the first snapshot and quote on the stream of ${acct.server}`, 30_000);
  resyncs.length = 0;
  return { acct, stream, trades, quotes, foreignQuotes, resyncs, errors, frames, held: () => ({ positions, orders }), unknown: () => unknownSince };
}

export type Watched = Awaited<ReturnType<typeof watchStream>>;

/**
 * The streams, once the clients stopped: every market order and close accepted on a watched account
 * delivered as one TRADE, once (the SDK resumes across the faults); after a resync (continuity lost,
 * snapshots follow) only those first sent after it must be. First sent: a request retried after a
 * 503 may have run at its first attempt, before the resync (its later 200 a replay); its deal is
 * then in the gap the resync declared, and in the snapshots after it. Quotes: BTCUSD's again after
 * `recovered`, and every one with its own server's spread. The last POSITIONS (P5: and ORDERS) the
 * broker's `book` (a P4 stream re-synced by the SDK with no POSITIONS since cannot show it: accepted;
 * one that got none without such a resync is not). Closes the streams.
 */
export async function checkStreams(round: number, watched: ReadonlyArray<{ w: Watched; history: History; book: BrokerBook }>, recovered: number): Promise<void> {
  const owedOf = ({ w, history }: (typeof watched)[number]) => {
    const firstSent = new Map<string, number>();
    for (const a of history.log) firstSent.set(a.clientOrderId, Math.min(firstSent.get(a.clientOrderId) ?? Infinity, a.sentAt));
    return history.finals.filter((a) => a.status === 200 && (a.kind === 'open' || a.kind === 'close'))
      .filter((a) => firstSent.get(a.clientOrderId)! > (w.resyncs.at(-1) ?? 0) && !w.trades.has(a.clientOrderId));
  };
  const bookOf = ({ w, book }: (typeof watched)[number]) => ({
    positions: book.positions.map((p) => `#${p.ticket}`).sort(),
    orders: SIM_SERVERS[w.acct.server] === 'P5' ? book.orders.map((o) => `#${o.ticket}@${o.openPrice}`).sort() : undefined,
  });
  const sameState = (x: (typeof watched)[number]) => x.w.unknown() || JSON.stringify(x.w.held()) === JSON.stringify(bookOf(x));
  try {
    await until(() => watched.every((x) => (owedOf(x).length === 0 && x.w.quotes.some((t) => t >= recovered) && sameState(x)) || x.w.errors.length > 0),
      `schedule ${round}: the TRADEs of the accepted orders and closes, quotes, and the broker's positions and orders on the streams`, 30_000)
      .catch((err: Error) => {
        throw new Error(`${err.message} (${watched.map((x) => `${x.w.acct.server}: missing ${owedOf(x).map((a) => a.clientOrderId).slice(0, 5).join(', ') || 'none'}, last quote ${x.w.quotes.at(-1) ? new Date(x.w.quotes.at(-1)!).toISOString() : 'never'}, reconnects ${x.w.stream.reconnects}, resyncs ${x.w.resyncs.length}${sameState(x) ? '' : `, the stream holds ${JSON.stringify(x.w.held())}, the broker ${JSON.stringify(bookOf(x))}`}`).join('; ')})`);
      });
  } finally {
    for (const { w } of watched) w.stream.close();
  }
  for (const { w } of watched) {
    expect(w.errors, `schedule ${round}: the stream of ${w.acct.server} ended`).toStrictEqual([]);
    expect([...w.trades].filter(([, n]) => n > 1), `schedule ${round}: TRADEs delivered twice on ${w.acct.server}`).toStrictEqual([]);
    expect(w.foreignQuotes, `schedule ${round}: quotes on ${w.acct.server}'s stream without its spread`).toStrictEqual([]);
  }
}

/**
 * Each login's whole history (`history`: every client's attempts on it, whichever account it was
 * bound to) against the broker's book: each id at most once at the broker, every 200 there under its
 * ticket, nothing no client sent; each position closed at most once; the positions and pending
 * orders at the broker as the clients were told (assertBook). Every final answer 200 or 409
 * IDEMPOTENCY_UNCERTAIN, every 503 clean, every request answered (or its connection ended) before
 * `hungMs`: a process frozen by the schedule answers when it wakes; none may just hang. `alsoFinal`:
 * other final answers a ledger's clients may get (its seat removed under them: 404 NOT_FOUND; the
 * book check then demands that none of those was carried out).
 */
export function checkLedgers(round: number, ledgers: ReadonlyArray<{ what: string; history: History; book: BrokerBook; alsoFinal?: (a: Answer) => boolean }>, hungMs: number): void {
  for (const { what, history: t, book, alsoFinal } of ledgers) {
    assertBook(t.log, book);
    expect(t.finals.filter((x) => !acceptableFinal(x) && !alsoFinal?.(x)), `schedule ${round}: final answers other than 200 or 409 IDEMPOTENCY_UNCERTAIN on ${what}`).toStrictEqual([]);
    expect(t.log.map(unclean503).filter(Boolean), `schedule ${round}: unclean 503s`).toStrictEqual([]);
    expect(t.log.filter((x) => x.status === 'refused' && x.answeredAt - x.sentAt >= hungMs).map((x) => `${x.clientOrderId}@${x.node} ${new Date(x.sentAt).toISOString()}`),
      `schedule ${round}: requests that got no answer for ${hungMs / 1000} s`).toStrictEqual([]);
  }
}

/** The longest interval between consecutive times (ms), 0 for fewer than two: from the traffic's
 *  start, through each accepted order's answer, to its stop, the longest an account went without one. */
const longestGap = (ts: number[]) => ts.sort((a, b) => a - b).reduce((m, t, i) => (i ? Math.max(m, t - ts[i - 1]!) : m), 0);

/** A run's sums over its schedules (newTotals, then addSummary after each). */
export type Totals = ReturnType<typeof newTotals>;
export const newTotals = () => ({ schedules: 0, faults: 0, attempts: 0, requests: 0, accepted: 0, acceptedByKind: {} as Record<string, number>, uncertain: 0, unavailable: 0, streamTrades: 0, streamQuotes: 0, streamReconnects: 0, streamResyncs: 0, longestStallMs: 0 });

/** One schedule's numbers (its JSON line): requests and answers, what the books hold at the end
 *  (`histories` and `books` side by side, one per account), the longest time an account went without
 *  a request accepted between `started` and `stopped`, the streams' counts. */
export function summarize(s: { round: number; seed: number; faults: number; histories: readonly History[]; books: readonly BrokerBook[]; watched: readonly Watched[]; started: number; stopped: number }) {
  const logs = s.histories.flatMap((t) => t.log);
  const finals = s.histories.flatMap((t) => t.finals);
  const acceptedByKind: Record<string, number> = {};
  for (const a of finals) if (a.status === 200) acceptedByKind[a.kind ?? 'open'] = (acceptedByKind[a.kind ?? 'open'] ?? 0) + 1;
  return {
    schedule: s.round, seed: s.seed, faults: s.faults, attempts: logs.length, requests: finals.length, accepted: finals.filter((a) => a.status === 200).length,
    uncertain: finals.filter((a) => a.status === 409).length, unavailable: logs.filter((a) => a.status === 503 || a.status === 'refused').length,
    acceptedByKind, acceptedPerAccount: s.histories.map((t) => t.finals.filter((x) => x.status === 200).length),
    // At the end, per account: positions open and pending orders in the book.
    positions: s.books.map((b) => b.positions.length), pending: s.books.map((b) => b.orders.length),
    longestStallMs: Math.max(...s.histories.map((t) => longestGap([s.started, ...t.finals.filter((x) => x.status === 200).map((x) => x.answeredAt), s.stopped]))),
    streamTrades: s.watched.reduce((n, w) => n + w.trades.size, 0), streamQuotes: s.watched.reduce((n, w) => n + w.quotes.length, 0),
    streamReconnects: s.watched.reduce((n, w) => n + w.stream.reconnects, 0), streamResyncs: s.watched.reduce((n, w) => n + w.resyncs.length, 0),
  };
}

/** Adds a schedule's numbers to the run's. */
export function addSummary(totals: Totals, sum: ReturnType<typeof summarize>): void {
  totals.schedules++;
  for (const k of ['faults', 'attempts', 'requests', 'accepted', 'uncertain', 'unavailable', 'streamTrades', 'streamQuotes', 'streamReconnects', 'streamResyncs'] as const) totals[k] += sum[k];
  for (const [k, n] of Object.entries(sum.acceptedByKind)) totals.acceptedByKind[k] = (totals.acceptedByKind[k] ?? 0) + n;
  totals.longestStallMs = Math.max(totals.longestStallMs, sum.longestStallMs);
}
