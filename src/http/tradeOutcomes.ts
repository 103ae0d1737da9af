// Counts of trade requests by outcome, for /metrics (tagw_orders_total): what an operator alerts
// on is a change in their mix (rejections climbing, conflicts appearing), not their number.
import { ApiError } from '../errors.js';

export type TradeOutcome = 'sent' | 'rejected' | 'replayed' | 'conflicted' | 'failed';

export class TradeOutcomes {
  /** op -> outcome -> count: no key string built per order. */
  private readonly counts = new Map<string, Map<TradeOutcome, number>>();

  /** One trade request's answer: its status and whether it was a replay, or the error it threw. */
  note(op: string, answer: { status: number; replay?: boolean } | { error: unknown }): void {
    const outcome = outcomeOf(answer);
    let byOutcome = this.counts.get(op);
    if (!byOutcome) this.counts.set(op, (byOutcome = new Map()));
    byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
  }

  /** [[op, outcome], count] for every pair seen. */
  series(): Array<[string[], number]> {
    const out: Array<[string[], number]> = [];
    for (const [op, byOutcome] of this.counts) for (const [outcome, n] of byOutcome) out.push([[op, outcome], n]);
    return out;
  }
}

export function outcomeOf(answer: { status: number; replay?: boolean } | { error: unknown }): TradeOutcome {
  if ('error' in answer) {
    const code = answer.error instanceof ApiError ? answer.error.code : undefined;
    return code === 'IDEMPOTENCY_UNCERTAIN' || code === 'IDEMPOTENCY_KEY_REUSED' ? 'conflicted' : 'failed';
  }
  if (answer.replay) return 'replayed';
  return answer.status === 200 ? 'sent' : 'rejected';
}
