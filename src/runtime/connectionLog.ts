// Each account's connection phase and its recent history, as its shard reported them (main
// thread). Feeds the tagw_broker_connections gauge and the dashboard's connection view; nothing
// here is persisted: a restart begins a new history from the phases the shards report again.
import { OPERATOR_PHASES, type LoginFailed, type OperatorPhase } from './hosts/accountCommands.js';

export interface PhaseChange { at: number; phase: OperatorPhase }
/** The account's last error: a drop or refusal (a phase change), or a failed login attempt (which
 *  changes no phase: an account that never connected stays `connecting`), with why when known. */
export interface LastError extends PhaseChange { reason?: string }

/** Distinct reasons kept as one string each (a bridge down fails every account with one message). */
const REASONS_INTERNED = 256;

/** Changes kept per account: enough to see a flapping connection, bounded whatever the flapping. */
export const HISTORY_LENGTH = 20;

/** The phase as the one string of its name: a phase that crossed from a shard is a copy of its own
 *  (each account's history held two, ~56 B; issue 19, memory per idle account). */
const interned = (phase: OperatorPhase): OperatorPhase => OPERATOR_PHASES.find((p) => p === phase) ?? phase;

export class ConnectionLog {
  // Each history is replaced, not pushed to, by an array of its exact length: a pushed array
  // reserves 17 places (~150 B per account). Changes are rare (a connection's phases).
  private readonly entries = new Map<string, readonly PhaseChange[]>();
  /** Accounts per current phase, kept as phases change: /metrics and /v1/status ask for them often
   *  (the overview every 2 s), and a walk of every account's history was O(accounts) each time. */
  private readonly inPhase = new Map<OperatorPhase, number>();
  /** Changes into 'reconnecting' since start (tagw_broker_reconnects_total). */
  reconnects = 0;
  /** Each account's last failed login attempt: when, and why. Only accounts that had one. */
  private readonly failures = new Map<string, LastError & { reason: string }>();
  private readonly reasons = new Map<string, string>();

  constructor(private readonly now: () => number) {}

  /** Records a phase report (a report of the phase the account is already in is not a change), or
   *  a failed login attempt. */
  note(accountId: string, report: OperatorPhase | LoginFailed): void {
    if (typeof report !== 'string') {
      this.failures.set(accountId, { at: this.now(), phase: this.phase(accountId) ?? 'connecting', reason: this.intern(report.failed) });
      return;
    }
    const phase = report;
    const h = this.entries.get(accountId) ?? [];
    if (h.length > 0 && h[h.length - 1]!.phase === phase) return;
    if (phase === 'reconnecting') this.reconnects++;
    if (h.length > 0) this.count(h[h.length - 1]!.phase, -1);
    this.count(phase, 1);
    const change: PhaseChange = { at: this.now(), phase: interned(phase) };
    this.entries.set(accountId, (h.length < HISTORY_LENGTH ? h : h.slice(h.length - HISTORY_LENGTH + 1)).concat(change));
  }

  /** Forgets an account (its seat was deleted). */
  forget(accountId: string): void {
    const h = this.entries.get(accountId);
    if (h && h.length > 0) this.count(h[h.length - 1]!.phase, -1);
    this.entries.delete(accountId);
    this.failures.delete(accountId);
  }

  private intern(reason: string): string {
    const known = this.reasons.get(reason);
    if (known !== undefined) return known;
    if (this.reasons.size < REASONS_INTERNED) this.reasons.set(reason, reason);
    return reason;
  }

  private count(phase: OperatorPhase, by: number): void {
    this.inPhase.set(phase, (this.inPhase.get(phase) ?? 0) + by);
  }

  phase(accountId: string): OperatorPhase | undefined {
    const h = this.entries.get(accountId);
    return h?.[h.length - 1]?.phase;
  }

  /** Oldest first. */
  history(accountId: string): readonly PhaseChange[] {
    return this.entries.get(accountId) ?? [];
  }

  /** Accounts per current phase, every phase in `phases` present (zeros included). */
  counts(phases: readonly OperatorPhase[]): Record<OperatorPhase, number> {
    const n = Object.fromEntries(phases.map((p) => [p, 0])) as Record<OperatorPhase, number>;
    for (const [p, c] of this.inPhase) if (c > 0) n[p] = c;
    return n;
  }

  /** The account's last error: its latest failed login attempt (when, the phase it was in then, why)
   *  when that is later than its latest change away from `connected` (a drop or a refusal), else that
   *  change, with the reason of a failed attempt since it was last connected (a refused login's). */
  lastError(accountId: string): LastError | undefined {
    const h = this.entries.get(accountId) ?? [];
    const f = this.failures.get(accountId);
    let change: PhaseChange | undefined;
    let connectedAt = -Infinity;
    for (let i = h.length - 1; i >= 0 && (!change || connectedAt === -Infinity); i--) {
      const p = h[i]!.phase;
      if (!change && (p === 'reconnecting' || p === 'refused')) change = h[i];
      else if (p === 'connected' && connectedAt === -Infinity) connectedAt = h[i]!.at;
    }
    if (f && (!change || f.at > change.at)) return f;
    if (!change) return undefined;
    return f && f.at >= connectedAt ? { ...change, reason: f.reason } : change;
  }
}
