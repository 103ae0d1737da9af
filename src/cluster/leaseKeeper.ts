// A node's leases over time. Every third of the lease it heartbeats, renews all it holds in one
// statement, and follows the plan (rendezvous.ts: bounded-load rendezvous from who holds what):
// acquires accounts it should own, hands over those that now belong to another live node. Its own clock (injected) bounds how long it trusts a lease: one
// not renewed within the lease of the moment the renewal was sent is dropped as lost, before
// PostgreSQL's expiry lets another node take it (the owner refuses to act on it from then on).
import type { Logger } from '../log.js';
import type { Clock } from '../util/clock.js';
import { errorMessage } from '../util/errorMessage.js';
import { acquireLeasesTelling, heartbeat, leaseRows, othersHoldLeases, releaseLeases, removeNode, renewLeases, type Acquired, type Lease } from './leases.js';
import type { NodeCounters } from './nodeCounters.js';
import type { Queryable } from './pgPool.js';
import { planLeases } from './rendezvous.js';
import { SupersededError } from './nodeTwin.js';

/** Why a node stopped owning an account without handing it over. */
export type LossReason =
  /** Not renewed within the lease by this node's clock (PostgreSQL or the node was slow, down, paused). */
  | 'expired'
  /** PostgreSQL no longer lists it as ours at that epoch (it expired there, maybe taken over). */
  | 'revoked';

export interface LeaseEvents {
  /** New leases: the node may start these accounts. */
  acquired?(leases: Lease[]): void;
  /** About to hand these over: the node must stop acting on them before this resolves (then the
   *  leases are released and another node may start them). */
  releasing?(accountIds: string[]): Promise<void> | void;
  /** Handed over: the leases are free now (announce it, so routers stop waiting for this node). */
  released?(leases: Lease[]): void;
  /** Lost: the node must drop these accounts at once, without another broker call or write (and
   *  tell its own router they are not here: announce owner null at that epoch). */
  lost?(leases: Lease[], reason: LossReason): void;
  /** A heartbeat landed after none did for a lease or more: the other nodes may have judged this
   *  one departed (and released what its sockets held of their accounts' streams). */
  rejoined?(): void;
  /** A newer process took this NODE_ID over (this one was frozen or cut off): every lease was
   *  dropped (lost, 'revoked'), no round runs any more; the process must stop. */
  superseded?(err: SupersededError): void;
}

export interface LeaseKeeperOptions {
  db: Queryable;
  nodeId: string;
  /** Where this node serves (shown to operators). */
  url?: string;
  /** This process's start (leases.ts newIncarnation), written with each heartbeat. */
  incarnation?: number;
  leaseMs: number;
  /** Monotonic in production (monotonicClock): a wall clock stepped back would stretch a lease. */
  clock: Clock;
  /** Every account that exists in the cluster (the nodes divide them: rendezvous.ts). */
  accounts: () => Promise<Iterable<string>> | Iterable<string>;
  events?: LeaseEvents;
  log?: Logger;
  /** Cold start (no other node holds a live lease): after start() the node only heartbeats for this
   *  long before its first acquisition (default: a renewal period, a third of the lease), so nodes
   *  that start together see each other and each takes only its own share, instead of the first
   *  taking every account and handing most over. A node joining a serving cluster does not wait.
   *  The same after a lapse of its heartbeat (PostgreSQL away past the lease: every node's lapsed). */
  settleMs?: number;
  /** The first round takes back, at once and at a new epoch, the leases held under this NODE_ID by
   *  an earlier process (leases.ts reclaimLeases), instead of waiting for them to expire. */
  reclaim?: () => Promise<Lease[]>;
  /** This node's NATS link, written with each heartbeat. A node whose link is down while a live peer
   *  reports its own up, for `stepDownMs` (checked at each round), is cut off: it hands every
   *  account over and acquires none until its link is back. With every node's link down
   *  (nats-server itself away) nobody steps down. Nodes that reach NATS never target one that does
   *  not (it could serve no forwarded call). Without it: no NATS state is written or read. */
  nats?: { up(): boolean; stepDownMs: number };
  /** This node's figures since its start, written with each heartbeat so that every node's status
   *  shows them (nodeCounters.ts). Without it: NULL. */
  counters?: () => NodeCounters | undefined;
}

/** Milliseconds that never go back (the deadlines' clock; not a time of day). */
export const monotonicClock: Clock = { now: () => performance.now() };

interface Held {
  epoch: number;
  /** This node's clock: when the lease may have lapsed (when its last renewal was sent + leaseMs). */
  validUntil: number;
}

/** Counts since start, for /metrics. */
export interface LeaseStats {
  acquired: number;
  /** Acquisitions of an account another node (or an earlier lease of this one) had held: epoch > 1. */
  takeovers: number;
  /** Of them, of a lease that ran out unreleased (its holder died or could not renew; also one taken
   *  back from an earlier process of this node, which did not hand it over): after a crash. */
  takeoversExpired: number;
  /** Of them, of a lease its holder released (a handover: SIGTERM, a rebalance, stepping down). */
  takeoversHandover: number;
  released: number;
  lost: number;
  /** Rounds that failed (PostgreSQL unreachable or slow). */
  failedRounds: number;
}

export class LeaseKeeper {
  readonly stats: LeaseStats = { acquired: 0, takeovers: 0, takeoversExpired: 0, takeoversHandover: 0, released: 0, lost: 0, failedRounds: 0 };
  private readonly leases = new Map<string, Held>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  /** The renewal out now (one at a time): a round's, or the period's own while a round is slow. */
  private renewing: Promise<void> | undefined;
  private stopped = false;
  /** Accounts being handed over: still renewed (ours until released), no longer acted on. */
  private readonly handingOver = new Set<string>();
  private readonly handovers = new Set<Promise<void>>();
  /** When the last heartbeat that landed was sent (this node's clock). */
  private lastBeat: number | undefined;
  private nudgePending = false;
  /** Between start() and the end of the settle period: rounds heartbeat only. */
  private settling = false;
  private settleTimer: NodeJS.Timeout | undefined;
  private reclaimPending: boolean;
  /** A newer process runs under this NODE_ID: nothing is renewed, acquired, released or removed. */
  private superseded = false;
  /** Since when (this node's clock, at a round) its NATS link has been down while a live peer
   *  reported its own up; undefined while not so. */
  private cutOffSince: number | undefined;
  /** Cut off past the bound: holds nothing, takes nothing (until its NATS link is back). */
  private steppedDown = false;

  constructor(private readonly o: LeaseKeeperOptions) {
    this.reclaimPending = o.reclaim !== undefined;
  }

  /** Renewal period: a third of the lease, so two renewals may fail before the lease lapses. */
  get periodMs(): number {
    return Math.max(1, Math.floor(this.o.leaseMs / 3));
  }

  /** Registers the node's heartbeat now, acquires after the settle period, then ticks every period
   *  (checking deadlines even while a slow tick is still out). */
  start(): void {
    if (this.timer) return;
    this.settle();
    void this.tick();
    this.timer = setInterval(() => {
      this.checkDeadlines();
      // A round still out (its statements slow: PostgreSQL just back, a loaded host) does not hold
      // up the renewals: they go every period on their own, or the leases lapse while PostgreSQL
      // answers. Its failure is the round's to report.
      if (this.inFlight && !this.stopped && !this.superseded) void this.renewOnce().catch(() => undefined);
      void this.tick();
    }, this.periodMs);
  }

  /**
   * Resolves once a round has claimed this NODE_ID (its first statement, reclaim: the node's row at
   * this incarnation, an earlier process of the id fenced out) or found it taken over (superseded),
   * true then; false if neither happened within `boundMs`. A round that fails is tried again every
   * period. A start waits for this before it listens: a start whose first round failed (its
   * statements slower than the query timeout on a loaded host) went on to serve under an id it had
   * not claimed, beside a newer process of the id, until its next round found it taken over.
   */
  async claim(boundMs: number): Promise<boolean> {
    let over = false;
    const bound = setTimeout(() => { over = true; }, boundMs);
    try {
      for (;;) {
        await this.tick();
        if (!this.reclaimPending || this.superseded) return true;
        if (this.stopped || over) return false;
        await new Promise((r) => setTimeout(r, this.periodMs));
      }
    } finally {
      clearTimeout(bound);
    }
  }

  /** Rounds only heartbeat for the settle period (none when it is 0), then a round plans at once. */
  private settle(): void {
    const settleMs = this.o.settleMs ?? this.periodMs;
    if (settleMs <= 0 || this.settling) return;
    this.settling = true;
    // After any round still out (it read the node list while settling).
    this.settleTimer = setTimeout(() => {
      this.endSettling();
      this.nudge();
    }, settleMs);
  }

  private endSettling(): void {
    this.settling = false;
    clearTimeout(this.settleTimer);
  }

  /** A heartbeat (each round's first statement) landed within the lease by this node's clock: it
   *  reaches PostgreSQL, so it can renew, acquire and make fenced writes (readiness; no query of its own). */
  reachesDatabase(): boolean {
    return this.lastBeat !== undefined && this.o.clock.now() - this.lastBeat < this.o.leaseMs;
  }

  /** The leases this node may act on now (within their deadline by its own clock). */
  held(): Lease[] {
    const now = this.o.clock.now();
    return [...this.leases].filter(([id, h]) => now < h.validUntil && !this.handingOver.has(id)).map(([accountId, h]) => ({ accountId, epoch: h.epoch }));
  }

  /** The account's lease if this node may act on it now and for `forMs` more (the time a command takes
   *  to reach the shard that makes the broker call): the epoch its fenced writes carry. The owner
   *  checks this before every broker call; after a pause (SIGSTOP) it is false at once, whichever of
   *  the queued request or the renewal timer runs first. */
  leaseOf(accountId: string, forMs = 0): Lease | undefined {
    const h = this.leases.get(accountId);
    if (!h || this.o.clock.now() + forMs >= h.validUntil || this.handingOver.has(accountId)) return undefined;
    return { accountId, epoch: h.epoch };
  }

  /** The account's lease is still this node's, within its deadline, also while being handed over:
   *  the node acts on it no more but may still store what it did before (its stream's frames). */
  holds(accountId: string): boolean {
    const h = this.leases.get(accountId);
    return h !== undefined && this.o.clock.now() < h.validUntil;
  }

  /** The epoch of the account's lease while holds() (also while being handed over): the fencing
   *  token its stream history's writes carry (docs/cluster.md "Fencing the history"). */
  epochOf(accountId: string): number | undefined {
    return this.holds(accountId) ? this.leases.get(accountId)!.epoch : undefined;
  }

  /** This node still holds the account's lease at `epoch` and is not handing it over (its deadline
   *  aside: a renewal may be late, and the deadline drops it as lost if so). */
  holdsAt(accountId: string, epoch: number): boolean {
    return this.leases.get(accountId)?.epoch === epoch && !this.handingOver.has(accountId);
  }

  /** Drops every lease whose deadline passed (reported as lost 'expired'); returns their accounts. */
  checkDeadlines(): string[] {
    const now = this.o.clock.now();
    const lapsed = [...this.leases].filter(([, h]) => now >= h.validUntil).map(([id]) => id);
    this.drop(lapsed, 'expired');
    return lapsed;
  }

  /** One round: heartbeat, renew, rebalance. A round already out is joined, not doubled. Errors
   *  (PostgreSQL down) are logged; the deadlines then decide. Resolves once the round and the
   *  handovers it started are done; the next round does not wait for those handovers. */
  tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.inFlight ??= this.round().catch((err: unknown) => {
      if (err instanceof SupersededError) return this.supersede(err);
      this.stats.failedRounds++;
      this.o.log?.warn('cluster lease round failed', { err: errorMessage(err) });
    }).finally(() => {
      this.inFlight = undefined;
      this.checkDeadlines();
    });
    return this.inFlight.then(() => this.settled());
  }

  /**
   * An account was released or lost elsewhere (a "no owner" announcement): run a round now rather
   * than at the next period, so its target takes it at once (a node that is not the target
   * acquires nothing in it). A round already out may have read the leases before the release, so
   * the nudged round follows it. Coalesced: a node handing over all it holds costs one round.
   */
  nudge(): void {
    if (this.stopped || this.nudgePending) return;
    this.nudgePending = true;
    setImmediate(() => {
      void (this.inFlight ?? Promise.resolve()).then(() => {
        this.nudgePending = false;
        return this.tick();
      });
    });
  }

  private async settled(): Promise<void> {
    await Promise.all([...this.handovers]);
  }

  private async round(): Promise<void> {
    const { db, nodeId, leaseMs, clock } = this.o;
    const sent = clock.now();
    if (this.reclaimPending) await this.reclaim();
    const natsUp = this.o.nats?.up();
    // The renewal beside the heartbeat, not after it: each waited for the other's round trip, and
    // a slow one (PostgreSQL just back) let leases taken by the round before lapse.
    const renewed = this.renewOnce();
    renewed.catch(() => undefined); // awaited below, unless the heartbeat fails first
    const nodes = await heartbeat(db, nodeId, this.o.url ?? '', leaseMs, this.o.incarnation, natsUp, this.o.counters?.());
    if (this.lastBeat !== undefined && clock.now() - this.lastBeat >= leaseMs) {
      this.o.events?.rejoined?.();
      // Back after a lapse, holding nothing: the other nodes' heartbeats lapsed too if PostgreSQL
      // itself was away, and they are back a moment apart. Planning over the live nodes now, the
      // first back took every account and handed most of them over a round later, with whatever
      // was under way on them (chaos seed 1219291306). As at a cold start it first only heartbeats
      // for the settle period, unless another node already serves (this one alone was cut off).
      if (this.leases.size === 0 && this.timer) this.settle();
    }
    this.lastBeat = sent;
    this.stepDownIf(natsUp, nodes.some((n) => n.nodeId !== nodeId && n.natsUp === true), sent);
    // Reaching NATS, this node targets no node that does not (its accounts go to those that can serve
    // them once it steps down); with its own link down it cannot tell, and targets every live node.
    const live = nodes.filter((n) => natsUp === false || n.natsUp !== false || n.nodeId === nodeId).map((n) => n.nodeId);
    // Settling (just started): heard by the others, nothing held yet, nothing taken; unless other
    // nodes already serve (not a cold start): then a joining node takes its share at once.
    if (this.settling) {
      if (!(await othersHoldLeases(db, nodeId))) return;
      this.endSettling();
    }
    await renewed;
    // Who holds what now: the plan keeps accounts where they are and moves only a node's surplus.
    const holders = new Map<string, string>();
    for (const r of await leaseRows(db)) if (r.live && r.owner !== null) holders.set(r.accountId, r.owner);
    const accounts = new Set(await this.o.accounts());
    const plan = this.steppedDown
      ? { acquire: [], release: [...this.leases.keys()] }
      : planLeases(nodeId, live, accounts, new Set(this.leases.keys()), holders);
    // With its link down and not stepped down (nats-server away, or this node's cut not yet past
    // the bound), a node keeps its surplus: the next owner could not read the account's stream
    // history from JetStream (its clients and this node's would resync) nor be reached by a
    // forwarded call. It moves once the link is back. Accounts without an owner are still taken.
    const keepSurplus = natsUp === false && !this.steppedDown;
    // In the background: stopping an account may take a while (calls in flight), and meanwhile this
    // node's other leases must go on being renewed.
    const release = plan.release.filter((id) => !this.handingOver.has(id) && !(keepSurplus && accounts.has(id)));
    if (release.length > 0) {
      const h = this.handOver(release).catch((err: unknown) => {
        this.o.log?.warn('cluster handover failed; retried next round', { err: errorMessage(err), accounts: release.length });
      }).finally(() => this.handovers.delete(h));
      this.handovers.add(h);
    }
    if (plan.acquire.length > 0 && !this.stopped) {
      const sentAt = clock.now();
      this.took(await acquireLeasesTelling(db, nodeId, plan.acquire, leaseMs, this.o.incarnation), sentAt);
    }
  }

  /** At each round: cut off (this node's NATS link down while a live peer's is up) since the first
   *  round that saw it for the bound or more: step down (hand everything over, as on SIGTERM, take
   *  nothing); its link up again: serve again. One round that does not see the cut starts the count
   *  anew (nats-server restarting: nodes reconnect a moment apart). */
  private stepDownIf(natsUp: boolean | undefined, peerUp: boolean, now: number): void {
    if (!this.o.nats) return;
    if (natsUp !== false || !peerUp) {
      this.cutOffSince = undefined;
      if (this.steppedDown && natsUp === true) {
        this.steppedDown = false;
        this.o.log?.info('NATS reachable again: this node takes accounts again');
      }
      return;
    }
    this.cutOffSince ??= now;
    if (this.steppedDown || now - this.cutOffSince < this.o.nats.stepDownMs) return;
    this.steppedDown = true;
    this.o.log?.warn('cut off from NATS while other nodes reach it: handing this node\'s accounts over until it is back', { accounts: this.leases.size, forMs: Math.round(now - this.cutOffSince) });
  }

  /** Stepped down: cut off from NATS past the bound while other nodes reach it (holds nothing). */
  get cutOff(): boolean {
    return this.steppedDown;
  }

  /** The leases an earlier process of this NODE_ID held, this process's now (a new epoch each). */
  private async reclaim(): Promise<void> {
    const sentAt = this.o.clock.now();
    const got = await this.o.reclaim!();
    this.reclaimPending = false;
    if (got.length === 0) return;
    this.o.log?.info('cluster leases taken back from an earlier process of this node', { accounts: got.length });
    // Not a cold start for this node: its accounts are served again at once.
    this.endSettling();
    // Its earlier process did not hand them over (it died, or was killed): takeovers after a crash.
    this.took(got.map((l) => ({ ...l, expired: true })), sentAt);
  }

  private took(got: Acquired[], sentAt: number): void {
    for (const l of got) this.leases.set(l.accountId, { epoch: l.epoch, validUntil: sentAt + this.o.leaseMs });
    this.stats.acquired += got.length;
    const taken = got.filter((l) => l.epoch > 1);
    const expired = taken.filter((l) => l.expired).length;
    this.stats.takeovers += taken.length;
    this.stats.takeoversExpired += expired;
    this.stats.takeoversHandover += taken.length - expired;
    if (got.length > 0) this.o.events?.acquired?.(got.map(({ accountId, epoch }) => ({ accountId, epoch })));
  }

  /** A newer process took this NODE_ID over: drop everything (its leases are at other epochs now). */
  private supersede(err: SupersededError): void {
    if (this.superseded) return;
    this.superseded = true;
    this.stopped = true;
    clearTimeout(this.settleTimer);
    clearInterval(this.timer);
    this.o.log?.error(err.message);
    this.drop([...this.leases.keys()], 'revoked');
    this.o.events?.superseded?.(err);
  }

  /** A renewal, or the one already out (which a round's plan then follows). */
  private renewOnce(): Promise<void> {
    return (this.renewing ??= this.renew().finally(() => {
      this.renewing = undefined;
    }));
  }

  private async renew(): Promise<void> {
    const { db, nodeId, leaseMs, clock } = this.o;
    const asked = this.snapshot();
    if (asked.length === 0) return;
    const sentAt = clock.now();
    const renewed = await renewLeases(db, nodeId, asked, leaseMs);
    const ok = new Set<string>();
    const orphans: Lease[] = [];
    for (const l of renewed) {
      const h = this.leases.get(l.accountId);
      // Dropped meanwhile (its deadline passed while the statement was out): not ours to act on, so
      // give it back rather than keep it renewed and idle.
      if (!h || h.epoch !== l.epoch) orphans.push(l);
      else {
        h.validUntil = sentAt + leaseMs;
        ok.add(l.accountId);
      }
    }
    this.drop(asked.filter((l) => !ok.has(l.accountId) && this.leases.get(l.accountId)?.epoch === l.epoch).map((l) => l.accountId), 'revoked');
    if (orphans.length > 0) await releaseLeases(db, nodeId, orphans);
  }

  private async handOver(accountIds: string[]): Promise<void> {
    const leases = accountIds.flatMap((id) => {
      const h = this.leases.get(id);
      return h && !this.handingOver.has(id) ? [{ accountId: id, epoch: h.epoch }] : [];
    });
    if (leases.length === 0) return;
    for (const l of leases) this.handingOver.add(l.accountId);
    try {
      // Stop acting first (leaseOf answers no from now on), then free the lease: never two nodes
      // acting on one account.
      await this.o.events?.releasing?.(leases.map((l) => l.accountId));
      for (const l of leases) if (this.leases.get(l.accountId)?.epoch === l.epoch) this.leases.delete(l.accountId);
      const freed = new Set(await releaseLeases(this.o.db, this.o.nodeId, leases));
      this.stats.released += freed.size;
      this.o.events?.released?.(leases.filter((l) => freed.has(l.accountId)));
    } finally {
      for (const l of leases) this.handingOver.delete(l.accountId);
    }
  }

  private snapshot(): Lease[] {
    return [...this.leases].map(([accountId, h]) => ({ accountId, epoch: h.epoch }));
  }

  private drop(accountIds: string[], reason: LossReason): void {
    const gone: Lease[] = [];
    for (const id of accountIds) {
      const h = this.leases.get(id);
      if (h && this.leases.delete(id)) gone.push({ accountId: id, epoch: h.epoch });
    }
    if (gone.length === 0) return;
    this.stats.lost += gone.length;
    this.o.log?.warn('cluster leases lost', { accounts: gone.length, reason });
    this.o.events?.lost?.(gone, reason);
  }

  /**
   * Stops renewing. With `handover` (SIGTERM) the accounts are handed over (releasing, then released)
   * after the node left the node list, so the others take them at their next round instead of after
   * the lease. Without it (tests of a crash) the leases are simply abandoned to expire. Never throws.
   */
  async stop(opts: { handover: boolean }): Promise<void> {
    this.stopped = true;
    clearTimeout(this.settleTimer);
    clearInterval(this.timer);
    this.timer = undefined;
    await this.inFlight;
    await this.renewing?.catch(() => undefined);
    await this.settled();
    if (!opts.handover || this.superseded) return;
    try {
      // Out of the node list first: by the time the leases are free the others already target them.
      await removeNode(this.o.db, this.o.nodeId, this.o.incarnation);
      await this.handOver([...this.leases.keys()]);
    } catch (err) {
      // PostgreSQL unreachable: the leases expire instead, and the others take over after the lease.
      this.o.log?.warn('cluster handover failed; leases left to expire', { err: errorMessage(err), accounts: this.leases.size });
    }
  }
}

/** Nudges the keeper whenever the node learns that an account has no owner (released or lost by
 *  another node), so the takeover does not wait for the next period. Returns the unsubscribe. */
export function nudgeOnRelease(owners: { onChange(listener: (accountId: string, owner: string | null) => void): () => void }, keeper: Pick<LeaseKeeper, 'nudge'>): () => void {
  return owners.onChange((_accountId, owner) => {
    if (owner === null) keeper.nudge();
  });
}
