// Clients of a cluster under test: an idempotent order through one node (recorded as an Attempt for
// the order ledger), a client that retries the same clientOrderId on other nodes until it gets an
// answer, and a stream of such clients running until told to stop.
import type { ClusterAccount, ClusterNode, ClusterProcs } from './clusterProcs.js';
import type { Attempt } from './orderLedger.js';

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

/** One /OrderSend through `node`, the clientOrderId also in the comment (the broker keeps it: the
 *  ledger's key). A request that gets no answer is 'refused'. */
export async function orderVia(node: Pick<ClusterNode, 'id' | 'url'>, acct: ClusterAccount, clientOrderId: string, timeoutMs = 20_000, operation: 'Buy' | 'Sell' = 'Buy'): Promise<Answer> {
  const q = new URLSearchParams({ id: acct.id, symbol: 'BTCUSD', operation, volume: '0.01', clientOrderId, comment: clientOrderId });
  const sentAt = Date.now();
  try {
    const r = await fetch(`${node.url}/OrderSend?${q}`, { headers: { 'x-api-key': acct.key }, signal: AbortSignal.timeout(timeoutMs) });
    const text = await r.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: kept as text, a scenario asserting clean errors will say so
    }
    const ticket = (body as { ticket?: unknown } | null)?.ticket;
    return {
      clientOrderId, node: node.id, status: r.status, body, replay: r.headers.get('idempotent-replay') === 'true', sentAt, answeredAt: Date.now(),
      ...(typeof ticket === 'number' ? { ticket } : {}),
      ...(r.headers.get('x-tagw-node') ? { answeredBy: r.headers.get('x-tagw-node')! } : {}),
      ...(r.headers.get('retry-after') ? { retryAfter: r.headers.get('retry-after')! } : {}),
      ...(r.headers.get('content-type') ? { contentType: r.headers.get('content-type')! } : {}),
    };
  } catch {
    return { clientOrderId, node: node.id, status: 'refused', replay: false, sentAt, answeredAt: Date.now() };
  }
}

/** Worth the same request again (on another node): no answer, or 503 (no owner yet, an engine down). */
const retryable = (a: Answer) => a.status === 'refused' || a.status === 503;

/**
 * A client that sends one clientOrderId until it has a final answer: it starts at node `start` and
 * moves to the next running node after each refused or 503 attempt. Every attempt goes to `log`.
 */
export async function retryingOrder(cluster: ClusterProcs, acct: ClusterAccount, clientOrderId: string, log: Answer[], opts: { start?: number; giveUpMs?: number; pauseMs?: number } = {}): Promise<Answer> {
  const deadline = Date.now() + (opts.giveUpMs ?? 60_000);
  let i = opts.start ?? 0;
  for (;;) {
    const live = cluster.running();
    const node = live[i++ % Math.max(1, live.length)] ?? cluster.nodes[0]!;
    const a = await orderVia(node, acct, clientOrderId);
    log.push(a);
    if (!retryable(a) || Date.now() > deadline) return a;
    await new Promise((r) => setTimeout(r, opts.pauseMs ?? 100));
  }
}

export interface Traffic {
  /** Every attempt so far. */
  readonly log: Answer[];
  /** Final answers, one per clientOrderId. */
  readonly finals: Answer[];
  /** Stops starting new orders and waits for those in flight to settle. */
  stop(): Promise<void>;
}

/** `clients` concurrent clients, each sending idempotent orders one after another (ids
 *  `<tag>-<client>-<n>`) through the nodes in turn, retrying each until it has a final answer.
 *  Paced (`pauseMs` between orders): a simulator account's margin holds about 250 of these buys. */
export function startTraffic(cluster: ClusterProcs, acct: ClusterAccount, opts: { tag: string; clients?: number; pauseMs?: number }): Traffic {
  const log: Answer[] = [];
  const finals: Answer[] = [];
  let running = true;
  const loops = Array.from({ length: opts.clients ?? 3 }, async (_, c) => {
    for (let n = 0; running; n++) {
      finals.push(await retryingOrder(cluster, acct, `${opts.tag}-${c}-${n}`, log, { start: c + n }));
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
