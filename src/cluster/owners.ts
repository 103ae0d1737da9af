// Who owns an account, as one node knows it. The truth is the lease store (PostgreSQL
// account_leases, fenced by epoch); this is its cache on every node, kept fresh without polling by
// the owners' announcements on `tagw.leases`, and filled on a miss from the store itself.
// An announcement older (by epoch) than what the cache holds is ignored: they may arrive out of order.
import type { Logger } from '../log.js';
import { errorMessage } from '../util/errorMessage.js';
import type { NatsLink } from './natsLink.js';
import { SUBJECTS } from './subjects.js';

/** An account's owner and the lease epoch it holds (owner null: nobody holds a live lease). */
export interface OwnerInfo { owner: string | null; epoch: number }

export type OwnerListener = (accountId: string, owner: string | null, epoch: number) => void;

/** What the router needs to know about ownership (leases implement it; tests use a memory one). */
export interface OwnerDirectory {
  /** The node that owns the account now, null while none does (a takeover in progress). */
  ownerOf(accountId: string): Promise<string | null>;
  /** What ownerOf would answer at once from the cache (no store lookup needed), else undefined. */
  fresh(accountId: string): string | null | undefined;
  /** Every owner change this node learns of, a new lease epoch of the same owner included (it
   *  re-acquired the account: restarted, or lost the lease and took it back, so its shards started
   *  the account afresh). Returns the unsubscribe. */
  onChange(listener: OwnerListener): () => void;
  /** The owner and epoch this node knows of now (undefined: never looked up or announced). */
  known(accountId: string): Readonly<OwnerInfo> | undefined;
  /** What an owner said of itself in a reply: taken as an announcement would be (a later epoch is news). */
  learn(accountId: string, info: OwnerInfo): void;
  /** The node we were sent to does not own the account (or is gone): drop what we knew, ask again. */
  forget(accountId: string): void;
}

/** The wire form of an announcement (JSON on `tagw.leases`). */
interface Announcement { a: string; o: string | null; e: number }

function isAnnouncement(v: unknown): v is Announcement {
  const x = v as Partial<Announcement> | null;
  return typeof x === 'object' && x !== null && typeof x.a === 'string' && (x.o === null || typeof x.o === 'string') && typeof x.e === 'number';
}

export interface OwnerCacheOptions {
  link: NatsLink;
  /** The lease store's answer for one account (a cache miss, or after forget()). */
  lookup: (accountId: string) => Promise<OwnerInfo>;
  log: Logger;
  /** "No owner" is trusted this long, then asked of the store again (default 250 ms): the next
   *  owner's announcement may be lost (its NATS link down as it acquired), and nothing else would
   *  correct it, as no call goes to a node to be refused. */
  noOwnerMs?: number;
  /** Monotonic milliseconds (injected in tests). */
  now?: () => number;
}

export class OwnerCache implements OwnerDirectory {
  /** stale: forgotten (ask the store next time); its epoch still rejects older announcements.
   *  at: when it was learned (a "no owner" goes stale by itself). */
  private readonly entries = new Map<string, OwnerInfo & { stale: boolean; at: number }>();
  private readonly lookups = new Map<string, Promise<OwnerInfo>>();
  private readonly listeners = new Set<OwnerListener>();
  private readonly sub;

  private readonly now: () => number;

  constructor(private readonly opts: OwnerCacheOptions) {
    this.now = opts.now ?? (() => performance.now());
    this.sub = opts.link.nc.subscribe(SUBJECTS.leases, {
      callback: (err, msg) => {
        if (err) return opts.log.warn('lease announcements ended', { err: errorMessage(err) });
        let v: unknown;
        try {
          v = msg.json();
        } catch {
          v = null;
        }
        if (isAnnouncement(v)) this.apply(v.a, { owner: v.o, epoch: v.e }, false);
        else opts.log.warn('malformed lease announcement ignored');
      },
    });
  }

  fresh(accountId: string): string | null | undefined {
    const k = this.entries.get(accountId);
    return k && !k.stale && (k.owner !== null || this.now() - k.at < (this.opts.noOwnerMs ?? 250)) ? k.owner : undefined;
  }

  async ownerOf(accountId: string): Promise<string | null> {
    const cached = this.fresh(accountId);
    if (cached !== undefined) return cached;
    let p = this.lookups.get(accountId);
    if (!p) {
      p = this.opts.lookup(accountId).finally(() => this.lookups.delete(accountId));
      this.lookups.set(accountId, p);
    }
    // An announcement may have come while the store answered: the newer epoch wins.
    this.apply(accountId, await p, true);
    return this.entries.get(accountId)!.owner;
  }

  onChange(listener: OwnerListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  known(accountId: string): Readonly<OwnerInfo> | undefined {
    return this.entries.get(accountId); // no copy: read on every forwarded call
  }

  learn(accountId: string, info: OwnerInfo): void {
    this.apply(accountId, info, false);
  }

  forget(accountId: string): void {
    const k = this.entries.get(accountId);
    if (k) k.stale = true;
  }

  /** Tells every node (and this one: noEcho) that the account changed owner. Leases call it after
   *  each acquire, takeover and release. Lost when NATS is down: the others find out on their
   *  next miss (a forwarded call refused or unanswered makes them forget and look up again). */
  announce(accountId: string, info: OwnerInfo): void {
    this.apply(accountId, info, true);
    if (!this.opts.link.up) return;
    const a: Announcement = { a: accountId, o: info.owner, e: info.epoch };
    this.opts.link.nc.publish(SUBJECTS.leases, JSON.stringify(a));
  }

  /** `sure`: the store's answer (or this node's own change), which also confirms a forgotten entry. */
  private apply(accountId: string, info: OwnerInfo, sure: boolean): void {
    const k = this.entries.get(accountId);
    // Older epoch: stale. Same epoch: only its release (owner null) is news; another owner under the
    // same epoch cannot be (epochs grow with every change of owner).
    if (k && (info.epoch < k.epoch || (info.epoch === k.epoch && info.owner !== null && info.owner !== k.owner))) return;
    // A later epoch is news even from the same owner: it re-acquired the account (a restart under
    // the same NODE_ID within the lease, or a lease lost and taken back), so its shards know
    // nothing of other nodes' streams of it.
    const changed = !k || k.owner !== info.owner || k.epoch !== info.epoch;
    if (!changed && !sure) return;
    this.entries.set(accountId, { owner: info.owner, epoch: info.epoch, stale: false, at: this.now() });
    if (changed) for (const l of this.listeners) l(accountId, info.owner, info.epoch);
  }

  close(): void {
    this.sub.unsubscribe();
    this.listeners.clear();
  }
}
