// Counts of trade requests by outcome, for /metrics (tagw_orders_total): what an operator alerts
// on is a change in their mix (rejections climbing, conflicts appearing), not their number.
import { ApiError } from '../errors.js';

export type TradeOutcome = 'sent' | 'rejected' | 'replayed' | 'conflicted' | 'failed';

export class TradeOutcomes {
  private readonly counts = new Map<string, number>();

  /** One trade request's answer: its status and whether it was a replay, or the error it threw. */
  note(op: string, answer: { status: number; replay?: boolean } | { error: unknown }): void {
    const outcome = outcomeOf(answer);
    const key = `${op}\u0000${outcome}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** [[op, outcome], count] for every pair seen. */
  series(): Array<[string[], number]> {
    return [...this.counts].map(([k, n]) => [k.split('\u0000'), n]);
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
