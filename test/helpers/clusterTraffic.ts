// Clients of a cluster under test: an idempotent trading request through one node (recorded as an
// Attempt for the order ledger), a client that retries the same clientOrderId on other nodes until it
// gets an answer, and a stream of such clients running until told to stop: market orders only, or a
// bot's mix (mixedBot: closes, pending orders placed, modified and deleted).
import type { ClusterAccount, ClusterNode } from './clusterProcs.js';
import type { Attempt, TradeKind } from './orderLedger.js';

export interface Answer extends Attempt {
  /** x-tagw-node: the node that answered (the one asked, whoever owns the account). */
  answeredBy?: string;
  retryAfter?: string;
  contentType?: string;
  body?: unknown;
  replay: boolean;
  /** Date.now() when the request was sent and when its answer (or failure) came. */
  sentAt: number;
  answeredAt: number;
}

/** One trading request: its route and parameters (besides the account id and clientOrderId), and
 *  for the ledger what it does (kind; the ticket it names; the price it asks for). */
export interface TradeRequest {
  route: 'OrderSend' | 'OrderClose' | 'OrderModify' | 'OrderDelete';
  clientOrderId: string;
  params: Record<string, string>;
  kind: TradeKind;
  target?: number;
  price?: number;
}

/** A market order of 0.01 BTCUSD, the clientOrderId also in the comment (the broker keeps it: the
 *  ledger's key). */
export function marketOrder(clientOrderId: string, operation: 'Buy' | 'Sell' = 'Buy'): TradeRequest {
  return { route: 'OrderSend', kind: 'open', clientOrderId, params: { symbol: 'BTCUSD', operation, volume: '0.01', comment: clientOrderId } };
}

/** One trading request through `node`, with its clientOrderId. A request that gets no answer is 'refused'. */
export async function tradeVia(node: Pick<ClusterNode, 'id' | 'url'>, acct: ClusterAccount, req: TradeRequest, timeoutMs = 20_000): Promise<Answer> {
  const q = new URLSearchParams({ id: acct.id, ...req.params, clientOrderId: req.clientOrderId });
  const what = { clientOrderId: req.clientOrderId, kind: req.kind, ...(req.target !== undefined ? { target: req.target } : {}), ...(req.price !== undefined ? { price: req.price } : {}) };
  const sentAt = Date.now();
  try {
    const r = await fetch(`${node.url}/${req.route}?${q}`, { headers: { 'x-api-key': acct.key }, signal: AbortSignal.timeout(timeoutMs) });
    const text = await r.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: kept as text, a scenario asserting clean errors will say so
    }
    const ticket = (body as { ticket?: unknown } | null)?.ticket;
    return {
      ...what, node: node.id, status: r.status, body, replay: r.headers.get('idempotent-replay') === 'true', sentAt, answeredAt: Date.now(),
      ...(typeof ticket === 'number' ? { ticket } : {}),
      ...(r.headers.get('x-tagw-node') ? { answeredBy: r.headers.get('x-tagw-node')! } : {}),
      ...(r.headers.get('retry-after') ? { retryAfter: r.headers.get('retry-after')! } : {}),
      ...(r.headers.get('content-type') ? { contentType: r.headers.get('content-type')! } : {}),
    };
  } catch {
    return { ...what, node: node.id, status: 'refused', replay: false, sentAt, answeredAt: Date.now() };
  }
}

/** One /OrderSend of a market order through `node` (marketOrder). */
export function orderVia(node: Pick<ClusterNode, 'id' | 'url'>, acct: ClusterAccount, clientOrderId: string, timeoutMs = 20_000, operation: 'Buy' | 'Sell' = 'Buy'): Promise<Answer> {
  return tradeVia(node, acct, marketOrder(clientOrderId, operation), timeoutMs);
}

/** Where the clients send: a cluster's nodes (ClusterProcs), or one gateway process restarted on new
 *  ports (test/chaos/single.chaos.ts): `running()` those that serve now, `nodes` every one. */
export interface Targets {
  readonly nodes: readonly Pick<ClusterNode, 'id' | 'url'>[];
  running(): readonly Pick<ClusterNode, 'id' | 'url'>[];
}

/** Worth the same request again (on another node): no answer, or 503 (no owner yet, an engine down). */
const retryable = (a: Answer) => a.status === 'refused' || a.status === 503;

/** What a client that follows the answers' advice sends again besides (docs/accounts-and-trading.md,
 *  the idempotency record's `recovering` row): a 500 `TERMINAL_ERROR` with `retry-after` (a reply lost
 *  after sending: "send this request again with the same clientOrderId"), and a 409
 *  `IDEMPOTENCY_UNCERTAIN` with `final: false` (the broker cannot be asked yet), after `retry-after`. */
export function followsRetryAdvice(a: Answer): boolean {
  if (retryable(a)) return true;
  const body = a.body as { error?: unknown; final?: unknown } | null;
  return a.retryAfter !== undefined && ((a.status === 500 && body?.error === 'TERMINAL_ERROR') || (a.status === 409 && body?.final === false));
}

/**
 * A client that sends one request until it has a final answer: it starts at node `start` and moves
 * to the next running node after each refused or 503 attempt. Every attempt goes to `log`.
 */
export async function retryingTrade(cluster: Targets, acct: ClusterAccount, req: TradeRequest, log: Answer[], opts: { start?: number; giveUpMs?: number; pauseMs?: number; retry?: (a: Answer) => boolean } = {}): Promise<Answer> {
  const deadline = Date.now() + (opts.giveUpMs ?? 60_000);
  let i = opts.start ?? 0;
  for (;;) {
    const live = cluster.running();
    const node = live[i++ % Math.max(1, live.length)] ?? cluster.nodes[0]!;
    const a = await tradeVia(node, acct, req);
    log.push(a);
    if (!(opts.retry ?? retryable)(a) || Date.now() > deadline) return a;
    await new Promise((r) => setTimeout(r, a.retryAfter && a.status !== 503 ? Number(a.retryAfter) * 1_000 : (opts.pauseMs ?? 100)));
  }
}

/** retryingTrade of a market order (marketOrder). */
export function retryingOrder(cluster: Targets, acct: ClusterAccount, clientOrderId: string, log: Answer[], opts: { start?: number; giveUpMs?: number; pauseMs?: number } = {}): Promise<Answer> {
  return retryingTrade(cluster, acct, marketOrder(clientOrderId), log, opts);
}

/** What one client sends next, and what it learns from each final answer. */
export interface Bot {
  next(clientOrderId: string): TradeRequest;
  settled(req: TradeRequest, final: Answer): void;
}

/** Market orders only. */
const marketBot = (): Bot => ({ next: (id) => marketOrder(id), settled: () => {} });

/** The mixed bot's steps, in turn: three market buys, two closes, two placements, two modifies and
 *  a delete in ten requests (a close with no position open buys; a modify or delete with no pending
 *  order, or a placement before the first fill, places or buys instead). */
const MIX = ['open', 'place', 'open', 'close', 'modify', 'open', 'close', 'delete', 'place', 'modify'] as const;

/**
 * A bot as real ones trade, each request idempotent under a clientOrderId of its own (also the
 * comment of orders and closes): market buys of 0.01 BTCUSD, closes of its own positions, and
 * pending orders far from the price, so they stay pending (a BuyLimit at half the last fill, a
 * SellLimit at one and a half times it, each at a price of its own), moved to another such price and
 * deleted. It acts only on what a 200 told it: a position or order whose request got any other final
 * answer (409 IDEMPOTENCY_UNCERTAIN) is left alone from then on, so its state at the broker is one
 * of at most two (bookFindings in orderLedger.ts).
 */
export function mixedBot(): Bot {
  const positions: number[] = [];
  const pending: Array<{ ticket: number; type: 'BuyLimit' | 'SellLimit' }> = [];
  let fill: number | undefined;
  let n = 0;
  const far = (type: 'BuyLimit' | 'SellLimit', k: number) => (type === 'BuyLimit' ? Math.round(fill! * 0.5) - k : Math.round(fill! * 1.5) + k);
  return {
    next(clientOrderId) {
      const i = n++;
      let step: (typeof MIX)[number] = MIX[i % MIX.length]!;
      if (step === 'close' && positions.length === 0) step = 'open';
      if ((step === 'modify' || step === 'delete') && pending.length === 0) step = 'place';
      if (step === 'place' && fill === undefined) step = 'open';
      if (step === 'close') {
        const ticket = positions.shift()!;
        return { route: 'OrderClose', kind: 'close', target: ticket, clientOrderId, params: { ticket: String(ticket), comment: clientOrderId } };
      }
      if (step === 'place') {
        const type = i % 4 < 2 ? 'BuyLimit' : 'SellLimit';
        const price = far(type, i);
        return { route: 'OrderSend', kind: 'place', price, clientOrderId, params: { symbol: 'BTCUSD', operation: type, volume: '0.01', price: String(price), comment: clientOrderId } };
      }
      if (step === 'modify') {
        const o = pending[i % pending.length]!;
        const price = far(o.type, i);
        return { route: 'OrderModify', kind: 'modify', target: o.ticket, price, clientOrderId, params: { ticket: String(o.ticket), price: String(price), stoploss: '0', takeprofit: '0' } };
      }
      if (step === 'delete') {
        const o = pending.shift()!;
        return { route: 'OrderDelete', kind: 'delete', target: o.ticket, clientOrderId, params: { ticket: String(o.ticket) } };
      }
      return marketOrder(clientOrderId);
    },
    settled(req, final) {
      const ok = final.status === 200 && final.ticket !== undefined;
      if (req.kind === 'open' && ok) {
        positions.push(final.ticket!);
        const price = (final.body as { openPrice?: unknown } | null)?.openPrice;
        if (typeof price === 'number') fill = price;
      } else if (req.kind === 'place' && ok) {
        pending.push({ ticket: final.ticket!, type: req.params.operation as 'BuyLimit' | 'SellLimit' });
      } else if (req.kind === 'modify' && !ok) {
        pending.splice(pending.findIndex((o) => o.ticket === req.target), 1);
      }
    },
  };
}

export interface Traffic {
  /** Every attempt so far. */
  readonly log: Answer[];
  /** Final answers, one per clientOrderId. */
  readonly finals: Answer[];
  /** Stops starting new orders and waits for those in flight to settle. */
  stop(): Promise<void>;
}

/** `clients` concurrent clients, each sending idempotent requests one after another (ids
 *  `<tag>-<client>-<n>`) through the nodes in turn, retrying each until it has a final answer: market
 *  orders, or what `bot` (one per client) chooses. Paced (`pauseMs` between requests): a simulator
 *  account's margin holds about 250 of these buys. */
export function startTraffic(cluster: Targets, acct: ClusterAccount, opts: { tag: string; clients?: number; pauseMs?: number; bot?: () => Bot; retry?: (a: Answer) => boolean }): Traffic {
  const log: Answer[] = [];
  const finals: Answer[] = [];
  let running = true;
  const loops = Array.from({ length: opts.clients ?? 3 }, async (_, c) => {
    const bot = (opts.bot ?? marketBot)();
    for (let n = 0; running; n++) {
      const req = bot.next(`${opts.tag}-${c}-${n}`);
      const final = await retryingTrade(cluster, acct, req, log, { start: c + n, ...(opts.retry ? { retry: opts.retry } : {}) });
      bot.settled(req, final);
      finals.push(final);
      await new Promise((r) => setTimeout(r, opts.pauseMs ?? 250));
    }
  });
  return {
    log, finals,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** A clean refusal while an engine is down or an account changes owner: 503, a JSON error with a
 *  code, and retry-after. Returns what is wrong with it, or undefined. */
export function unclean503(a: Answer): string | undefined {
  if (a.status !== 503) return undefined;
  const code = (a.body as { error?: unknown } | null)?.error;
  if (!a.contentType?.includes('application/json') || typeof code !== 'string') return `503 without a JSON error from ${a.node}: ${JSON.stringify(a.body)}`;
  if (!a.retryAfter) return `503 ${code} without retry-after from ${a.node}`;
  return undefined;
}

/** A final answer the scenarios accept: 200, or 409 IDEMPOTENCY_UNCERTAIN (the owner died while the
 *  order was at the broker: the client must look at its history). */
export function acceptableFinal(a: Answer): boolean {
  return a.status === 200 || (a.status === 409 && (a.body as { error?: unknown } | null)?.error === 'IDEMPOTENCY_UNCERTAIN');
}

/** From `t` to the first 200 answer to a request sent at or after `t` (what a client sees of a
 *  takeover or outage), or undefined. */
export function firstAcceptedAfter(log: readonly Answer[], t: number): number | undefined {
  const ok = log.filter((a) => a.status === 200 && a.sentAt >= t).map((a) => a.answeredAt);
  return ok.length ? Math.min(...ok) - t : undefined;
}

/** Attempts counted by node and answer (status and error code), for failure messages. */
export function tally(log: readonly Answer[]): string {
  const n = new Map<string, number>();
  for (const a of log) {
    const k = `${a.node}:${a.status}${typeof (a.body as { error?: unknown } | null)?.error === 'string' ? ` ${(a.body as { error: string }).error}` : ''}`;
    n.set(k, (n.get(k) ?? 0) + 1);
  }
  return [...n].map(([k, v]) => `${k} x${v}`).join(', ');
}
