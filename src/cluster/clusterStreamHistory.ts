// The stream edge's shared history (src/stream/shared.ts) in cluster mode: JetStream for the
// numbered frames (jsHistory.ts), a feed per followed account (accountFeed.ts), the lease keeper
// for who numbers. docs/cluster.md "Streams and resume".
import type { NatsConnection } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import type { Logger } from '../log.js';
import type { DealMark } from '../store/streamHistory.js';
import { errorMessage } from '../util/errorMessage.js';
import { apiError } from '../errors.js';
import { AccountFeed, takeOver, type FeedFrame } from './accountFeed.js';
import { JetStreamHistory, type HistoryLimits, type NumberedFrame, type Replay, type StreamPosition } from './jsHistory.js';

export interface ClusterStreamHistoryOptions {
  nc: NatsConnection;
  limits: HistoryLimits;
  /** The history stream's replicas in JetStream (NATS_STREAM_REPLICAS). */
  replicas: number;
  /** This node holds the account's lease now. */
  owns: (accountId: string) => boolean;
  /** The lease is still this node's, also while being handed over. */
  holds: (accountId: string) => boolean;
  /** The lease epoch of the account's lease while this node holds it (LeaseKeeper.epochOf). */
  leaseEpoch: (accountId: string) => number | undefined;
  /** Registers what a handover waits for before the leases are released. */
  onHandingOver: (settled: (boundMs: number) => Promise<void>) => void;
  /** Registers what runs when this node acquired accounts (their shards started them). */
  onAcquired: (listener: (accountIds: string[]) => void) => void;
  /** Registers what runs when an account's shard stream opens again after all closed (router.ts). */
  onReopened: (listener: (accountId: string) => void) => void;
  log: Logger;
}

export class ClusterStreamHistory {
  /** The feeds open on this node: each catches up when the NATS connection is back (AccountFeed.catchUp). */
  private readonly feeds = new Set<AccountFeed>();

  private constructor(private readonly js: JetStreamHistory, private readonly o: ClusterStreamHistoryOptions) {
    void this.watchReconnects();
  }

  private async watchReconnects(): Promise<void> {
    try {
      for await (const s of this.o.nc.status()) if (s.type === 'reconnect') for (const f of this.feeds) f.catchUp();
    } catch (err) {
      this.o.log.error('stream history: NATS status watch ended', { err: errorMessage(err) });
    }
  }

  static async open(o: ClusterStreamHistoryOptions): Promise<ClusterStreamHistory> {
    return new ClusterStreamHistory(await JetStreamHistory.open({ nc: o.nc, limits: o.limits, replicas: o.replicas, log: o.log }), o);
  }

  owns(accountId: string): boolean {
    return this.o.owns(accountId);
  }

  holds(accountId: string): boolean {
    return this.o.holds(accountId);
  }

  onHandingOver(settled: (boundMs: number) => Promise<void>): void {
    this.o.onHandingOver(settled);
  }

  onAcquired(listener: (accountIds: string[]) => void): void {
    this.o.onAcquired(listener);
  }

  onReopened(listener: (accountId: string) => void): void {
    this.o.onReopened(listener);
  }

  async kept(accountId: string): Promise<boolean> {
    return (await this.js.head(accountId)) !== undefined;
  }

  leaseEpoch(accountId: string): number | undefined {
    return this.o.leaseEpoch(accountId);
  }

  takeOver(accountId: string, newEpoch: string, startDeal: DealMark, lease?: number): ReturnType<typeof takeOver> {
    return takeOver(this.js, accountId, () => newEpoch, startDeal, lease);
  }

  startEpoch(accountId: string, epoch: string, deal: DealMark, rebound = false, lease?: number): Promise<void> {
    return this.js.startEpoch(accountId, epoch, deal, rebound ? 'rebound' : undefined, lease);
  }

  append(accountId: string, frames: readonly NumberedFrame[]): Promise<void> {
    return this.js.append(accountId, frames);
  }

  republish(accountId: string, frame: NumberedFrame, again: string): Promise<void> {
    return this.js.republish(accountId, frame, again);
  }

  replay(accountId: string, since: StreamPosition): Promise<Replay> {
    return this.js.replay(accountId, since).catch((err: unknown) => {
      // No answer (a request timing out, no responders, the connection closed or reconnecting) says
      // nothing about the history: SERVICE_UNAVAILABLE, which a resume reads again on within its bound.
      throw err instanceof JetStreamApiError ? err : apiError('SERVICE_UNAVAILABLE', `the cluster's account history (JetStream) did not answer: ${errorMessage(err)}`);
    });
  }

  async follow(
    accountId: string, since: StreamPosition | null, onFrame: (f: FeedFrame) => void, onBreak: (epoch: string, rebound: boolean, at?: number) => void,
  ): Promise<{ feed: AccountFeed; position: StreamPosition | null; recovered: boolean; storedAt: number | null }> {
    let opened: AccountFeed | undefined;
    const { feed, start } = await AccountFeed.open({
      nc: this.o.nc, history: this.js, accountId, since, onFrame, onBreak: (epoch, why, at) => onBreak(epoch, why === 'rebound', at), log: this.o.log,
      onClose: () => void (opened && this.feeds.delete(opened)),
    });
    opened = feed;
    this.feeds.add(feed);
    return { feed, position: start.position, recovered: start.recovered, storedAt: start.storedAt };
  }
}
