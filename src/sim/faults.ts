// Fault injection for benchmark harnesses and tests, per server or per account:
// connection drops for a duration, added reply latency, trade rejects, "timeout after
// send" (the trade executes, the reply is lost; with unknownAfterSend the broker then cannot be
// asked about it for a while either) and mutes (the session stays up but delivers
// no ticks or candles for a duration). Each probability fault draws from its own RNG, seeded from
// the config seed and the fault (kind, server, login) when it is set, so a run is reproducible:
// the same fault set again takes the same trades of the same sequence of requests.
import { hashString, mix32, Rng } from './hash.js';

/** Every kind, for the schemas that take one (simulator config, HTTP routes). */
export const FAULT_KINDS = ['drop', 'latency', 'reject', 'timeoutAfterSend', 'unknownAfterSend', 'mute'] as const;
/** A fault's fields besides `kind` and its target. */
const FIELD_NAMES = ['durationMs', 'latencyMs', 'count', 'probability', 'lookupFailMs'] as const;
type FieldName = (typeof FIELD_NAMES)[number];
/** The fields each kind takes: a field of another kind would be ignored, so the fault routes and
 *  the servers file refuse it. */
export const FAULT_FIELDS: Record<FaultKind, readonly FieldName[]> = {
  drop: ['durationMs'],
  mute: ['durationMs'],
  latency: ['latencyMs', 'durationMs'],
  reject: ['count', 'probability', 'durationMs'],
  timeoutAfterSend: ['count', 'probability', 'durationMs'],
  unknownAfterSend: ['count', 'probability', 'lookupFailMs', 'durationMs'],
};
type FaultSpecFields = { kind: FaultKind } & Partial<Record<FieldName, unknown>>;

/** What a spec lacks or has too much of for its kind (the field it concerns, if one), or undefined:
 *  one rule for the fault routes and the servers file. */
export function faultSpecProblem(spec: FaultSpecFields): { field?: string; message: string } | undefined {
  const foreign = FIELD_NAMES.find((k) => spec[k] !== undefined && !FAULT_FIELDS[spec.kind].includes(k));
  if (foreign) return { field: foreign, message: `not for ${spec.kind}${foreign === 'lookupFailMs' ? ' (only for unknownAfterSend)' : ''} (${spec.kind} takes ${FAULT_FIELDS[spec.kind].join(', ')})` };
  if ((spec.kind === 'drop' || spec.kind === 'mute') && spec.durationMs === undefined) return { field: 'durationMs', message: `required for a ${spec.kind}` };
  if (spec.kind === 'latency' && spec.latencyMs === undefined) return { field: 'latencyMs', message: 'required for latency' };
  if (isTradeKind(spec.kind)) {
    if (spec.count === undefined && spec.probability === undefined) return { message: `${spec.kind} needs 'count' or 'probability'` };
    if (spec.count !== undefined && spec.probability !== undefined) return { message: `${spec.kind} takes 'count' or 'probability', not both` };
  }
  if (spec.kind === 'unknownAfterSend' && spec.lookupFailMs === undefined) return { field: 'lookupFailMs', message: 'required for unknownAfterSend' };
  return undefined;
}

/** The kinds that act on trade requests (`count` or `probability` picks which). */
type TradeFaultKind = 'reject' | 'timeoutAfterSend' | 'unknownAfterSend';
const isTradeKind = (k: FaultKind): k is TradeFaultKind => k === 'reject' || k === 'timeoutAfterSend' || k === 'unknownAfterSend';
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultSpec {
  readonly server: string;
  /** Omit for every account of the server. */
  readonly login?: string;
  readonly kind: FaultKind;
  /** How long it lasts (from when it is set): required for drop and mute; a latency, reject or
   *  timeoutAfterSend without it lasts until cleared (or its count is used up). */
  readonly durationMs?: number;
  /** latency: added to every reply. */
  readonly latencyMs?: number;
  /** reject / timeoutAfterSend / unknownAfterSend: the next `count` trade requests... */
  readonly count?: number;
  /** ...or each trade request with this probability. */
  readonly probability?: number;
  /** unknownAfterSend: how long after a trade it took the broker cannot be asked about it
   *  (`lookupRequest` fails), as a broker that is down right after it executed. */
  readonly lookupFailMs?: number;
}

export interface Fault extends FaultSpec {
  readonly id: number;
  readonly createdMs: number;
  /** Trades left for count-based faults. */
  remaining?: number;
  /** unknownAfterSend: lookups fail until then (from its last trade; the fault stays listed until then). */
  lookupFailUntil?: number;
}

export type FaultListener = (fault: Fault) => void;

export class FaultController {
  private readonly faults = new Map<number, Fault>();
  private nextId = 1;
  private readonly listeners = new Set<FaultListener>();

  constructor(
    private readonly seed: number,
    private readonly now: () => number,
  ) {}

  /** `shared`: the count is kept there (one Int32 over a SharedArrayBuffer), taken from by every
   *  simulator given it, one per thread: a gateway's shards count one fault's trades together. */
  set(spec: FaultSpec, shared?: Int32Array): Fault {
    const fault: Fault = { ...spec, id: this.nextId++, createdMs: this.now(), ...(spec.count !== undefined ? { remaining: shared ? Atomics.load(shared, 0) : spec.count } : {}) };
    // Not enumerable: list() gives plain copies.
    if (shared && spec.count !== undefined) Object.defineProperty(fault, 'shared', { value: shared, enumerable: false });
    if (spec.probability !== undefined) Object.defineProperty(fault, 'rng', { value: faultRng(this.seed, spec), enumerable: false });
    this.faults.set(fault.id, fault);
    for (const l of this.listeners) l(fault);
    return fault;
  }

  /** Remove one fault, or all; only of a server, and only those set on one login of it (not the
   *  server-wide ones), when given. Returns how many were removed that were still in force. */
  clear(id?: number, server?: string, login?: string): number {
    this.expire(); // what ran its course is gone already: not counted as cleared
    let n = 0;
    for (const f of [...this.faults.values()]) {
      if ((id === undefined || f.id === id) && (server === undefined || f.server === server) && (login === undefined || f.login === login)) {
        this.faults.delete(f.id);
        n++;
      }
    }
    return n;
  }

  list(): Fault[] {
    this.expire();
    return [...this.faults.values()].map((f) => ({ ...f }));
  }

  /** Called with every fault that is set (connections use it to drop at once). */
  onSet(listener: FaultListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private matches(f: Fault, server: string, login: string): boolean {
    return f.server === server && (f.login === undefined || f.login === login);
  }

  private expire(): void {
    const now = this.now();
    for (const f of this.faults.values()) {
      synced(f);
      if (over(f, now) || spent(f, now)) this.faults.delete(f.id);
    }
  }

  /** Remaining outage in ms for this account, 0 if none. */
  dropRemaining(server: string, login: string): number {
    if (this.faults.size === 0) return 0;
    const now = this.now();
    let max = 0;
    for (const f of this.faults.values()) {
      if (f.kind !== 'drop' || !this.matches(f, server, login)) continue;
      max = Math.max(max, f.createdMs + (f.durationMs ?? 0) - now);
    }
    return max;
  }

  /** Whether this account's market data (ticks, candles) is muted now. Runs per delivered tick:
   *  false at once while no fault is set; a mute found over is removed. */
  muted(server: string, login: string): boolean {
    if (this.faults.size === 0) return false;
    const now = this.now();
    for (const f of this.faults.values()) {
      if (f.kind !== 'mute' || !this.matches(f, server, login)) continue;
      if (f.createdMs + (f.durationMs ?? 0) > now) return true;
      this.faults.delete(f.id);
    }
    return false;
  }

  latency(server: string, login: string): number {
    if (this.faults.size === 0) return 0;
    const now = this.now();
    let total = 0;
    for (const f of this.faults.values()) {
      if (f.kind !== 'latency' || !this.matches(f, server, login)) continue;
      if (over(f, now)) this.faults.delete(f.id);
      else total += f.latencyMs ?? 0;
    }
    return total;
  }

  /** Decide the fate of one trade request: consumes counts and RNG draws. */
  tradeFault(server: string, login: string): TradeFaultKind | null {
    if (this.faults.size === 0) return null;
    const now = this.now();
    for (const f of this.faults.values()) {
      if (!isTradeKind(f.kind) || !this.matches(f, server, login)) continue;
      if (over(f, now)) {
        this.faults.delete(f.id);
        continue;
      }
      if (f.remaining !== undefined) {
        if (!take(f)) continue;
        return this.took(f, now);
      }
      if (f.probability !== undefined && rngOf(f)!.next() < f.probability) return this.took(f, now);
    }
    return null;
  }

  /** A trade request the fault takes: an unknownAfterSend's lookups fail from now on, for its lookupFailMs. */
  private took(f: Fault, now: number): TradeFaultKind {
    if (f.kind === 'unknownAfterSend') f.lookupFailUntil = now + (f.lookupFailMs ?? 0);
    if (spent(f, now)) this.faults.delete(f.id);
    return f.kind as TradeFaultKind;
  }

  /** Whether the next trade request of the login may be taken by an unknownAfterSend: its claim is
   *  then written before the trade (as through a bridge), so a lost reply leaves a durable `sent`. */
  claimsFirst(server: string, login: string): boolean {
    if (this.faults.size === 0) return false;
    for (const f of this.faults.values()) {
      if (f.kind === 'unknownAfterSend' && this.matches(f, server, login) && (synced(f).remaining === undefined || f.remaining! > 0)) return true;
    }
    return false;
  }

  /** Whether the broker cannot be asked about the login's requests now (an unknownAfterSend took one of
   *  its trades less than lookupFailMs ago, and was not cleared). */
  lookupFails(server: string, login: string): boolean {
    if (this.faults.size === 0) return false;
    const now = this.now();
    for (const f of this.faults.values()) {
      if (f.kind === 'unknownAfterSend' && this.matches(f, server, login) && !over(f, now) && (f.lookupFailUntil ?? 0) > now) return true;
    }
    return false;
  }
}

/** A probability fault's own sequence: the same seed and fault (kind, server, login) draw the same one
 *  from when it is set, whatever other faults drew before or draw in between (one RNG per simulator,
 *  drawn from since its start, gave the same fault set again on a running gateway other trades). */
function faultRng(seed: number, spec: FaultSpec): Rng {
  return new Rng(mix32((seed ^ 0xfa17) ^ hashString(`${spec.kind}\u0000${spec.server}\u0000${spec.login ?? ''}`)));
}
const rngOf = (f: Fault) => (f as { rng?: Rng }).rng;

/** A count kept in shared memory (FaultController.set's `shared`), or undefined. */
const sharedOf = (f: Fault) => (f as { shared?: Int32Array }).shared;

/** `f.remaining` read again from its shared count, when it has one (another thread may have taken). */
function synced(f: Fault): Fault {
  const c = sharedOf(f);
  if (c) f.remaining = Math.max(0, Atomics.load(c, 0));
  return f;
}

/** One trade off a count-based fault's count, if one is left. */
function take(f: Fault): boolean {
  const c = sharedOf(f);
  if (!c) {
    if (f.remaining! <= 0) return false;
    f.remaining!--;
    return true;
  }
  for (;;) {
    const left = Atomics.load(c, 0);
    if (left <= 0) {
      f.remaining = 0;
      return false;
    }
    if (Atomics.compareExchange(c, 0, left, left - 1) === left) {
      f.remaining = left - 1;
      return true;
    }
  }
}

/** A count-based fault with no trade left to take, and no lookup failure left to give. */
function spent(f: Fault, now: number): boolean {
  return f.remaining !== undefined && f.remaining <= 0 && !((f.lookupFailUntil ?? 0) > now);
}

/** Whether a fault has run its course at `now`: a drop or mute `durationMs` after it was set (none:
 *  at once); any other kind then too when it was given a `durationMs`, else never by time. */
function over(f: Fault, now: number): boolean {
  if (f.kind === 'drop' || f.kind === 'mute') return f.createdMs + (f.durationMs ?? 0) <= now;
  return f.durationMs !== undefined && f.createdMs + f.durationMs <= now;
}
