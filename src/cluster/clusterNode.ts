// A gateway's cluster side, composed (docs/cluster.md): the PostgreSQL side (startPgNode: schema,
// tenancy mirror, ledger, lease keeper), the NATS link, the owner cache, the router whose local side
// is FencedShards over the node's ShardSet, and the stream relay. Leases drive the shards: an
// acquired account is adopted (started from its mirrored binding) before the node announces it;
// one handed over is released before its lease is freed; a lost one is released at once (queued on
// its shard ahead of any later command, and FencedShards refuses its trades from that moment).
import type { Logger } from '../log.js';
import type { ShardEvent } from '../runtime/protocol.js';
import type { Shards, ShardSet } from '../runtime/shardSet.js';
import { Adoptions } from './adoptions.js';
import type { Db } from '../store/db.js';
import type { Clock } from '../util/clock.js';
import { SessionStore, type SessionRow } from '../store/sessions.js';
import { errorMessage } from '../util/errorMessage.js';
import { SUBJECTS } from './subjects.js';
import type { TenancyWrites } from '../store/tenancyWrites.js';
import { ClusterTenancy, type TenancyNotice } from './clusterTenancy.js';
import { FencedShards } from './fencedShards.js';
import { BindingRecords } from './bindingRecords.js';
import { CallDrain } from './callDrain.js';
import { Departures } from './departures.js';
import { SessionRecords } from './sessionRecords.js';
import { nudgeOnRelease } from './leaseKeeper.js';
import { replacedBy, TWIN_TAKEN_OVER } from './nodeTwin.js';
import { StreamFollower } from './streamFollow.js';
import { RoutedShards } from './routedShards.js';
import { NearSources } from './nearSources.js';
import { loadQuoteLogins } from '../runtime/quoteLogins.js';
import { quietAnnouncer } from './quietNotices.js';
import { AccountStore } from '../store/accounts.js';
import { clusterOverview, leaseRows, type Lease, type NodeRow } from './leases.js';
import { nodeCounters, type QuoteSessionStatus } from './nodeCounters.js';
import { startNatsNode, type NatsNode } from './natsNode.js';
import { startPgNode, type PgNode } from './pgNode.js';
import type { AccountRouter } from './router.js';
import type { StreamRelay } from './streamRelay.js';
import { ACCOUNT_BINDING_EVENT } from '../runtime/hosts/accountCommands.js';
import { GATEWAY_EVENT } from '../runtime/hosts/gatewayCommands.js';
import '../runtime/hosts/ownershipCommands.js';

/** clusterSettings() of src/config.ts. */
export interface ClusterNodeSettings { natsUrl: string; databaseUrl: string; nodeId: string; leaseMs: number; ownerWaitMs: number; aliveAskMs?: number; stepDownMs?: number; settleMs?: number;
  /** QUOTE_LOGINS_FILE (absolute): the servers with a market-data login (nearSources.ts). */
  quoteLoginsFile?: string }

export interface ClusterNodeOptions {
  settings: ClusterNodeSettings;
  /** Where this node serves (cluster_nodes.url, shown to operators). */
  url: string;
  /** The node's SQLite: the mirror of the cluster's tenancy. */
  sqlite: Db;
  log: Logger;
  clock: Clock;
  /** Events other nodes relayed here: the same path as this node's own shards' events. */
  onEvent: (ev: ShardEvent) => void;
  /** Lease deadlines (tests inject one; default monotonic). */
  deadlineClock?: Clock;
  mirrorEveryMs?: number;
}

/** What /metrics and /v1/status show of the node. */
export interface ClusterStatus {
  nodeId: string;
  natsUp: boolean;
  /** Accounts whose lease this node holds now. */
  ownedHere: number;
  /** Cut off from NATS past CLUSTER_STEP_DOWN_MS while other nodes reach it: holds and takes nothing. */
  steppedDown: boolean;
  leases: PgNode['keeper']['stats'];
  routing: AccountRouter['stats'];
  relay: StreamRelay['stats'];
}

/** Calls between nodes before the NATS side is wired (none yet). */
const NO_CALLS = { forwarded: 0, served: 0, unavailable: 0, ownerWaits: 0 } as const;

export class ClusterNode {
  readonly nodeId: string;
  private wired: { set: ShardSet; adopted: Adoptions; calls: CallDrain; nats: NatsNode; shards: Shards; tenancy: ClusterTenancy; near: NearSources } | undefined;
  /** Gateway sessions in PostgreSQL: written by the owner, read by any node, restored by the next owner. */
  private readonly sessions: SessionRecords;
  /** Binding changes made by this node's shards (login, platform, build), copied to PostgreSQL. */
  private readonly bindings: BindingRecords;
  /** This node's SQLite sessions (the shards write them): whose account a handle is. */
  private readonly sessionRows: SessionStore;
  /** The cluster as last read from PostgreSQL (every third of the lease): for /metrics and status. */
  private seen: { nodes: NodeRow[]; unowned: number } = { nodes: [], unowned: 0 };
  private seenTimer: NodeJS.Timeout | undefined;
  /** Nodes that left: what their sockets held of the streams of accounts owned here is released. */
  private readonly departures: Departures;
  /** What this node does after a tenancy write (its own or another node's): set by the gateway. */
  onTenancyNotice: (n: TenancyNotice) => void = () => {};
  /** Accounts this node acquired, once its shards started them: set by the gateway (the stream edge). */
  onAcquired: (accountIds: string[]) => void = () => {};
  /** Accounts that left this node (handed over, lost), once its shards stopped them: set by the
   *  gateway (their connection phases are no longer this node's). */
  onReleased: (accountIds: string[]) => void = () => {};
  /** Resolves once the stream frames this node numbered so far are stored, or after `boundMs`:
   *  set by the gateway (the stream edge). */
  beforeHandOver: (boundMs: number) => Promise<void> = async () => {};
  /** A newer process took this node's NODE_ID over: it holds nothing and must stop (main: exit 2). */
  onSuperseded: (message: string) => void = () => {};
  /** Why this process was superseded, if it was: one superseded at its first round fails its start. */
  private supersededBy: Error | undefined;
  private constructor(private readonly o: ClusterNodeOptions, readonly pg: PgNode) {
    this.nodeId = o.settings.nodeId;
    const records = { pool: pg.pool, sqlite: o.sqlite, nodeId: this.nodeId, keeper: pg.keeper, clock: o.clock, log: o.log };
    this.sessions = new SessionRecords(records);
    this.bindings = new BindingRecords(records, (id) => this.refreshBindings([id]));
    this.sessionRows = new SessionStore(o.sqlite);
    this.departures = new Departures(this.nodeId);
    // What a mirror pass changed goes the way of a notice: a node that missed the notice (NATS is at
    // most once) drops its stale keys, limits and seats at its next pass, every second.
    pg.mirror.changed = (n) => this.onTenancyNotice(n);
  }

  /**
   * Connects PostgreSQL and fills the tenancy mirror (before the gateway reads its SQLite or
   * listens). Then attach() the node's ShardSet (made with `ownedKeys: () => node.owned()`) and
   * start() to take leases.
   */
  static async open(o: ClusterNodeOptions): Promise<ClusterNode> {
    // The keeper's events need the node, made once the pool exists; none fires before start().
    let node: ClusterNode | undefined;
    const pg = await startPgNode({
      databaseUrl: o.settings.databaseUrl, nodeId: o.settings.nodeId, url: o.url, leaseMs: o.settings.leaseMs, sqlite: o.sqlite, log: o.log, clock: o.clock,
      ...(o.deadlineClock ? { deadlineClock: o.deadlineClock } : {}), ...(o.mirrorEveryMs ? { mirrorEveryMs: o.mirrorEveryMs } : {}),
      // Read from the first round on (after attach): cut off from NATS past the bound, it steps down.
      nats: { up: () => node?.wired?.nats.link.up ?? false, stepDownMs: o.settings.stepDownMs ?? o.settings.leaseMs },
      // With each heartbeat, so that any node's status shows this one's figures.
      counters: () => (node ? nodeCounters(node.pg.keeper.stats, node.wired?.nats.router.stats ?? NO_CALLS, node.wired?.near.quoteSessionsSeen()) : undefined),
      ...(o.settings.settleMs === undefined ? {} : { settleMs: o.settings.settleMs }),
      events: {
        acquired: (leases) => void node?.adopt(leases),
        releasing: (ids) => node?.handOver(ids),
        released: (leases) => node?.announceNone(leases),
        // Judged departed meanwhile (PostgreSQL alone cut off past the lease): the owners released
        // its sockets' streams; open them again there.
        rejoined: () => void node?.wired?.nats.router.rejoin(),
        superseded: (err) => {
          if (!node) return;
          node.supersededBy = err;
          // The forwarded calls in hand are this process's alone (the id's queue group): answered
          // ("not held here": fenced) before it stops, so their callers send them on at once.
          void (node.wired?.nats.router.stopServing(o.settings.ownerWaitMs) ?? Promise.resolve()).finally(() => node?.onSuperseded(err.message));
        },
        lost: (leases, reason) => {
          void node?.release(leases.map((l) => l.accountId), `lost (${reason})`);
          node?.announceNone(leases);
        },
      },
    });
    node = new ClusterNode(o, pg);
    return node;
  }

  /** Connects NATS with the node's own shards as the owner's side of the router (adoption, lease
   *  check and fenced claim first). Rejects when no NATS server answers. */
  async attach(set: ShardSet): Promise<void> {
    const { nodeId, ownerWaitMs, natsUrl } = this.o.settings;
    const adopted = new Adoptions(set, this.pg.keeper, ownerWaitMs);
    const fenced = new FencedShards({ nodeId, shards: adopted, keeper: this.pg.keeper, ledger: this.pg.ledger, clock: this.o.clock, log: this.o.log, replaced: () => this.replaced() });
    const calls = new CallDrain(this.sessions.wrap(this.bindings.wrap(fenced)));
    let nats: NatsNode;
    try {
      nats = await startNatsNode({
        url: natsUrl, nodeId, incarnation: this.pg.incarnation, marketOnInterest: true, answerAlive: false, shards: calls, lookupOwner: this.pg.lookupOwner, ownerWaitMs, onEvent: this.o.onEvent, log: this.o.log, clock: this.o.clock,
        holds: (accountId) => this.pg.keeper.holds(accountId),
        ...(this.o.settings.aliveAskMs === undefined ? {} : { aliveAskMs: this.o.settings.aliveAskMs }),
      });
    } catch (err) {
      await this.pg.close({ handover: false });
      throw err;
    }
    // A "no owner" announcement: the account's target takes it now, not at its next round.
    nudgeOnRelease(nats.owners, this.pg.keeper);
    const tenancy = new ClusterTenancy({ nodeId, pg: this.pg, link: nats.link, leaseMs: this.o.settings.leaseMs, log: this.o.log, sqlite: this.o.sqlite, clock: this.o.clock, apply: (n) => this.onTenancyNotice(n) });
    // A symbol this node's sockets follow on another node's account also comes from an account of the
    // same server running here, if there is one (nearSources.ts).
    const bindings = AccountStore.of(this.o.sqlite);
    const near = new NearSources({
      shards: set, serverOf: (id) => bindings.getLive(id)?.server, log: this.o.log,
      quiet: { nodeId, announce: quietAnnouncer(nats.link, this.o.log) },
      // Servers with a market-data login: their quote session serves what no local account does.
      ...(this.o.settings.quoteLoginsFile ? { quoteServers: new Set(loadQuoteLogins(this.o.settings.quoteLoginsFile).keys()) } : {}),
    });
    nats.relay.watch = near.watch;
    // A shard that died took the streams it held with it: the owner's ledger and the nodes holding them follow.
    set.onDeath((shard) => nats.router.shardDied((id) => set.shardFor(id) === shard));
    this.wired = { set, adopted, calls, nats, shards: new RoutedShards(set, nats.router, new StreamFollower(near.relayWith(nats.relay))), tenancy, near };
    // The bindings of the accounts running here are written by their shards: the mirror leaves them be.
    this.pg.mirror.runsHere = (id) => adopted.has(id);
    // Gateway sessions live in the SQLite of the node that owned the account when they were made:
    // it tells the others the session's row (handleDirectory falls back to findSession).
    nats.link.nc.subscribe(SUBJECTS.sessionFind, {
      callback: (err, msg) => {
        if (err) return;
        const row = this.sessionRows.byHash(msg.string());
        msg.respond(row?.state === 'live' ? JSON.stringify(row) : '');
      },
    });
  }

  /** Whether a newer process took this node's NODE_ID over (PostgreSQL's node row says so); if so,
   *  a lease round now finds it and stops this process (exit 2), not at its next renewal. */
  private async replaced(): Promise<boolean> {
    const newer = await replacedBy(this.pg.pool, this.nodeId, this.pg.incarnation);
    if (newer) void this.pg.keeper.tick();
    return newer;
  }

  /** A live gateway session another node made (by its handle's hash), or undefined: PostgreSQL's
   *  record, else (its copy failed) every other live node answers (bounded at 1 s); NATS down: undefined. */
  async findSession(hash: string): Promise<SessionRow | undefined> {
    const recorded = await this.sessions.byHash(hash).catch((err: unknown) => {
      this.o.log.warn('gateway session lookup in the cluster database failed', { err: errorMessage(err) });
      return undefined;
    });
    if (recorded) return recorded;
    const { link } = this.w.nats;
    if (!link.up) return undefined;
    try {
      // Asked now, not as last read: a node that just joined may hold the session.
      const others = (await this.overview()).nodes.filter((n) => n.heartbeatAgeMs < this.o.settings.leaseMs && n.nodeId !== this.nodeId).length;
      if (others === 0) return undefined;
      const replies = await link.nc.requestMany(SUBJECTS.sessionFind, hash, { strategy: 'count', maxMessages: others, maxWait: 1_000 });
      for await (const m of replies) if (m.data.length > 0) return m.json<SessionRow>();
    } catch (err) {
      this.o.log.warn('gateway session lookup across nodes failed', { err: errorMessage(err) });
    }
    return undefined;
  }

  private get w(): NonNullable<ClusterNode['wired']> {
    if (!this.wired) throw new Error('cluster node used before attach()');
    return this.wired;
  }

  /** What Services.shards is in cluster mode. */
  get shards(): Shards {
    return this.w.shards;
  }

  /** Where routes write tenancy in cluster mode (PostgreSQL first, every node told). */
  get tenancy(): TenancyWrites {
    return this.w.tenancy;
  }

  /** Keys' last use, written to PostgreSQL (the mirror brings it back); failures are logged. */
  readonly usageSink = {
    touchKeys: (times: Iterable<[string, number]>): void => {
      void this.pg.tenancy.touchKeys([...times]).catch((err: unknown) => this.o.log.warn('could not record keys\' last use', { err: errorMessage(err) }));
    },
  };

  /**
   * Before the node's SQLite bootstrap: the cluster's operator customer (and, with no management key
   * configured, its first management key) made once in PostgreSQL (PgTenancy.bootstrapOperator),
   * then mirrored here, so the SQLite bootstrap finds both. `createdKey`: this node made the key.
   */
  async bootstrapOperator(managementKeyConfigured: boolean, now: number): Promise<{ customerId: string; createdKey?: string }> {
    const op = await this.pg.tenancy.bootstrapOperator(managementKeyConfigured, now);
    await this.pg.mirror.sync();
    return op;
  }

  get router(): AccountRouter {
    return this.w.nats.router;
  }

  get relay(): StreamRelay {
    return this.w.nats.relay;
  }

  /** The node's NATS connection (the stream history in JetStream uses it too). */
  get natsConnection(): NatsNode['link']['nc'] {
    return this.w.nats.link.nc;
  }

  /** This node holds the account's lease now (it numbers the account's stream events). */
  owns(accountId: string): boolean {
    return this.pg.keeper.leaseOf(accountId) !== undefined;
  }

  /** The account's lease is still this node's, also while it is being handed over. */
  holds(accountId: string): boolean {
    return this.pg.keeper.holds(accountId);
  }

  /**
   * An event of this node's shards, for the nodes whose sockets follow it (before attach: none do).
   * What a shard changed by itself, outside any command, goes to PostgreSQL from here: a platform
   * its broker server corrected, a gateway session it ended (the account re-bound to a login of the
   * other platform, found at that login), so no node resolves that handle afterwards.
   */
  publish(ev: ShardEvent): void {
    if (ev.kind === ACCOUNT_BINDING_EVENT) void this.bindings.sync(ev.key);
    else if (ev.kind === GATEWAY_EVENT.end) {
      const account = this.sessionRows.byHash(ev.key)?.account_id;
      if (account !== undefined && this.owns(account)) void this.sessions.sync(account);
    }
    this.wired?.nats.relay.publish(ev);
  }

  /** Market data this node's sockets get too, relayed once uWS has written their frames (ownerOrder). */
  publishAfterLocalWrites(ev: ShardEvent): void {
    this.wired?.nats.relay.publishAfterLocalWrites(ev);
  }

  private announceNone(leases: Lease[]): void {
    for (const l of leases) this.wired?.nats.owners.announce(l.accountId, { owner: null, epoch: l.epoch });
  }

  /** The accounts this node holds leases for (ShardSetOptions.ownedKeys: a restarted shard runs these). */
  owned(): string[] {
    return this.pg.keeper.held().map((l) => l.accountId);
  }

  /** Starts the lease rounds; resolves after the first (its heartbeat is in PostgreSQL, so every
   *  tenancy write from then on waits for this node's mirror too). */
  async start(): Promise<void> {
    // Restarted under its NODE_ID: its earlier process, asked over NATS, must be gone (exit 2 if not);
    // then this one answers for the id (its forwarded calls too: before, a start refused beside a live
    // process answered that process's calls "not held here", and the callers sent them again while the
    // process placed them), before its first heartbeat says it runs.
    const { liveness, router } = this.w.nats;
    const twin = await this.pg.refuseLiveTwin(() => liveness.ask(this.nodeId));
    if (twin !== 'no-live-beat') this.o.log.info(TWIN_TAKEN_OVER[twin], { nodeId: this.nodeId });
    router.serve();
    await liveness.answer(this.nodeId, this.pg.incarnation);
    this.pg.start();
    const look = () => {
      void this.overview().then((o) => {
        this.seen = o;
        // A node gone (SIGKILL, or SIGTERM before its sockets' closes reached us): its hub will not
        // close what its sockets opened on the accounts owned here; release it as that hub would.
        for (const id of this.departures.seen(this.liveNodes().map((n) => n.nodeId))) void this.wired?.nats.router.streams.forgetNode(id);
        // A node started again under its id within the lease (never judged departed): what its
        // earlier process's sockets held here goes, as for a departed node.
        for (const n of this.liveNodes()) void this.wired?.nats.router.streams.supersede(n.nodeId, n.incarnation);
      }, () => this.departures.failed());
      // Copies the database did not take (it was away): again, until they land or the lease moves on.
      this.bindings.copies.retryFailed();
      this.sessions.copies.retryFailed();
      void this.wired?.tenancy.audit.retry();
    };
    look();
    this.seenTimer = setInterval(look, Math.max(100, Math.floor(this.o.settings.leaseMs / 3))).unref();
    // Its first round claims the id; one that failed (PostgreSQL slower than the query timeout) is tried again for up to a lease.
    const claimed = await this.pg.keeper.claim(this.o.settings.leaseMs);
    if (!claimed) this.o.log.warn('NODE_ID not claimed within the lease (PostgreSQL slow or unreachable): serving; a later round claims it', { nodeId: this.nodeId });
    // Taken over at its first round (another process of the id started at the same time, later):
    // the start fails (exit 2). Before, main was not listening for it yet: the process went on to
    // serve, holding nothing, answering the id's forwarded calls "not held here" beside the other.
    if (this.supersededBy) throw this.supersededBy;
  }

  /** Each local shard gets its share of `accountIds` (one command per shard). */
  private perShard(accountIds: readonly string[], op: 'shard.adopt' | 'shard.release'): Promise<unknown> {
    const by = new Map<number, string[]>();
    for (const id of accountIds) {
      const s = this.w.set.shardFor(id);
      by.set(s, [...(by.get(s) ?? []), id]);
    }
    return Promise.all([...by].map(([s, ids]) => this.w.set.callShard(s, op, { accountIds: ids })));
  }

  /** Acquired: the shards start the accounts (the command is queued before any forwarded call the
   *  announcement brings), then every node learns the new owner. */
  private async adopt(acquired: Array<{ accountId: string; epoch: number }>): Promise<void> {
    // Their gateway sessions first: the shard resumes what its SQLite holds when it starts them.
    await this.sessions.restore(acquired.map((l) => l.accountId))
      .catch((err: unknown) => this.o.log.warn('gateway sessions of acquired accounts not restored', { accounts: acquired.length, err: errorMessage(err) }));
    // Handed over or lost while the sessions were read: their release reached the shards before this
    // start, which would run them here without their lease, for good (a second broker connection
    // beside the next owner's). Checked now, in the same turn as the start is queued: a release
    // from now on reaches the shard after it.
    const leases = acquired.filter((l) => this.pg.keeper.holdsAt(l.accountId, l.epoch));
    if (leases.length < acquired.length) this.o.log.info('accounts gone before their start: not started here', { accounts: acquired.length - leases.length });
    if (leases.length === 0) return;
    const started = this.perShard(leases.map((l) => l.accountId), 'shard.adopt');
    this.w.adopted.add(leases.map((l) => l.accountId));
    for (const l of leases) this.w.nats.owners.announce(l.accountId, { owner: this.nodeId, epoch: l.epoch });
    await started.catch((err: unknown) => this.o.log.error('could not start acquired accounts', { accounts: leases.length, err: errorMessage(err) }));
    this.w.near.added(leases.map((l) => l.accountId).filter((id) => this.w.adopted.has(id)));
    this.onAcquired(leases.map((l) => l.accountId));
  }

  /** Handing over: the calls already running on these accounts (an order at the broker) finish
   *  first, up to the owner wait (the keeper refuses new ones from now on), then they stop here.
   *  Meanwhile, NATS reachable, the stream frames numbered here and not stored yet are stored
   *  (their retries after an outage), within the same wait: released before, they would be lost to
   *  the next owner, which continues from JetStream's head, and this node's sockets would resync. */
  private async handOver(ids: string[]): Promise<void> {
    const wait = this.o.settings.ownerWaitMs;
    await Promise.all([this.w.calls.drain(ids, wait), this.w.nats.link.up ? this.beforeHandOver(wait) : undefined]);
    await this.release(ids, 'handed over');
  }

  private async release(ids: string[], why: string): Promise<void> {
    this.w.adopted.delete(ids);
    this.w.near.removed(ids);
    this.o.log.info('accounts leave this node', { accounts: ids.length, why });
    // Their bindings as the cluster has them (a change of their shards PostgreSQL refused is undone
    // here), again once the shards stopped them (a bind in flight may have written meanwhile).
    this.refreshBindings(ids);
    await this.perShard(ids, 'shard.release').catch((err: unknown) => this.o.log.error('could not stop released accounts', { accounts: ids.length, err: errorMessage(err) }));
    this.refreshBindings(ids);
    // Taken again meanwhile (a handover undone, a lease won back): its phases are this node's again.
    this.onReleased(ids.filter((id) => !this.w.adopted.has(id)));
  }

  /** This node's SQLite takes these accounts' bindings from PostgreSQL at the next mirror pass, run now. */
  private refreshBindings(ids: readonly string[]): void {
    this.pg.mirror.refresh(ids);
    void this.pg.mirror.sync().catch((err: unknown) => this.o.log.warn('tenancy mirror pass failed', { err: errorMessage(err) }));
  }

  status(): ClusterStatus {
    return {
      nodeId: this.nodeId, natsUp: this.w.nats.link.up, ownedHere: this.pg.keeper.held().length, steppedDown: this.pg.keeper.cutOff,
      leases: this.pg.keeper.stats, routing: this.w.nats.router.stats, relay: this.w.nats.relay.stats,
    };
  }

  /** Symbols this node's sockets follow on other nodes' accounts, and how many a local account serves (nearSources.ts). */
  nearCounts(): { wanted: number; served: number; quoted: number; quiet: number; stalls: number } {
    return this.wired?.near.counts() ?? { wanted: 0, served: 0, quoted: 0, quiet: 0, stalls: 0 };
  }

  /** This node's quote sessions, read from its shards now / as last read (nearSources.ts). */
  quoteSessions(): Promise<QuoteSessionStatus[]> {
    return this.wired?.near.quoteSessions() ?? Promise.resolve([]);
  }
  quoteSessionsSeen(): QuoteSessionStatus[] {
    return this.wired?.near.quoteSessionsSeen() ?? [];
  }

  /** Readiness (/readyz): NATS connected (it can forward and relay) and PostgreSQL answering its
   *  lease rounds within the lease (it can hold accounts and make fenced writes). */
  readiness(): { nats: boolean; database: boolean } {
    return { nats: this.wired?.nats.link.up ?? false, database: this.pg.keeper.reachesDatabase() };
  }

  /** Audit rows not in PostgreSQL yet (kept on disk while it was unreachable; /metrics). */
  auditPending(): number {
    return this.wired?.tenancy.audit.pending ?? 0;
  }

  /** One more try for the audit rows kept; those still unwritten are named (by count) in the log. */
  private async flushAudit(): Promise<void> {
    const audit = this.wired?.tenancy.audit;
    if (!audit?.pending) return;
    await audit.retry();
    if (audit.pending > 0) this.o.log.warn('audit rows not written yet: the cluster database was unreachable when the node closed; they stay in its SQLite and are written at its next start', { rows: audit.pending });
  }

  /** Nodes whose heartbeat is younger than the lease, as last read. */
  liveNodes(): NodeRow[] {
    return this.seen.nodes.filter((n) => n.heartbeatAgeMs < this.o.settings.leaseMs);
  }

  /** Accounts no node holds (a takeover in progress), as last read. */
  unowned(): number {
    return this.seen.unowned;
  }

  /** The node running each of these accounts now, from PostgreSQL's leases (null: none holds it, a
   *  takeover under way; absent: never leased, e.g. a seat without a broker login). */
  async owners(accountIds: readonly string[]): Promise<Map<string, string | null>> {
    return new Map((await leaseRows(this.pg.pool, accountIds)).map((r) => [r.accountId, r.live ? r.owner : null]));
  }

  /** Every node PostgreSQL knows of, with its live lease count (/v1/status). */
  overview(): Promise<{ nodes: NodeRow[]; unowned: number }> {
    return clusterOverview(this.pg.pool);
  }

  /**
   * SIGTERM (`handover`): after the HTTP drain, the accounts are handed over (each stops here before
   * its lease is freed), then the node stops answering forwarded calls and leaves NATS. Without
   * handover (a test's crash) the leases are left to expire. Never throws.
   */
  async close(opts: { handover: boolean }): Promise<void> {
    clearInterval(this.seenTimer);
    this.wired?.near.stop();
    await this.flushAudit();
    await this.pg.close(opts);
    this.wired?.tenancy.close();
    await this.wired?.nats.close().catch(() => undefined);
  }
}
