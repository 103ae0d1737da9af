// Which stored messages of an account's history count (docs/cluster.md "Streams and resume",
// "Fencing the history"). Every message an owner writes carries its lease epoch (PostgreSQL's
// fencing epoch of the account, +1 at each acquisition), and a new owner's tenure begins with a
// fence: a marker restating the head it continues (epoch, seq), written only if nothing was stored
// after that head (JetStream's expected last subject sequence). A write of an earlier owner that
// reaches nats-server after the fence (a dead owner's publish still in a kernel buffer, a frozen
// owner's flushed at its thaw: a "ghost") is stored all the same, after it: readers going through
// the messages in stored order skip any with an older lease than one they met. Pure: no I/O.

/** What a reader needs of one stored message: its number, its writer's lease (absent: written by a
 *  node of an earlier version, which fenced nothing: taken as it is), whether it is a fence, and a
 *  fence's `headLease`: the lease of the head it restates. */
export interface LeasedMessage { epoch: string; seq: number; lease?: number; fence?: boolean; headLease?: number }

/** A replayed frame (jsHistory.ts HistoryEntry, restated). */
export interface ReplayedFrame { seq: number; at: number; frame: string }

/** The lease order of one account's history, met message by message in stored order. */
export class LeaseOrder {
  constructor(private max = 0) {}

  /** The highest lease met so far (0: none). */
  get lease(): number {
    return this.max;
  }

  /** 'stale': written by an owner after a later owner's tenure began (skip it); 'newer': the first
   *  message met of a later tenure than any before; 'current' otherwise. */
  meet(m: Pick<LeasedMessage, 'lease'>): 'stale' | 'newer' | 'current' {
    if (m.lease === undefined || m.lease === this.max) return 'current';
    if (m.lease < this.max) return 'stale';
    const first = this.max > 0;
    this.max = m.lease;
    return first ? 'newer' : 'current';
  }
}

/**
 * The frames of one epoch after `since`, from the stored messages read in stored order from some
 * point on (where the replay's bisect stopped). A message of a later tenure than those taken so far
 * shows that some of them were earlier owners' writes stored after that tenure's fence: a fence
 * drops those past the seq it restates, and the one at that seq if it is not the head it restated
 * (another lease); a tenure's frame met before its fence (the fence lay before the read's start)
 * drops every one taken with an earlier lease: all were stored after that fence. Epoch markers (seq
 * 0), fences, frames of other epochs and a frame stored again (a seq taken already) add nothing.
 */
export class ReplayTaker {
  readonly out: ReplayedFrame[] = [];
  /** The lease of each frame in `out`. */
  private readonly leases: Array<number | undefined> = [];
  private readonly order: LeaseOrder;
  /** A later tenure continues from before `since`: the position itself was an earlier owner's
   *  write stored after the takeover (the history cannot vouch for it). */
  private rewound = false;

  constructor(private readonly epoch: string, private readonly since: number, lease = 0) {
    this.order = new LeaseOrder(lease);
  }

  /** The highest lease met (the lease of the last owner whose messages were read). */
  get lease(): number {
    return this.order.lease;
  }

  take(m: LeasedMessage, at: number, frame: () => string): void {
    const met = this.order.meet(m);
    if (met === 'stale') return;
    if (met === 'newer') {
      const keep = m.fence ? m.seq : m.seq - 1;
      if (m.epoch === this.epoch && keep < this.since) this.rewound = true;
      const drop = (i: number) => this.out[i]!.seq > keep || (m.fence ? this.out[i]!.seq === keep && !!m.headLease && this.leases[i] !== undefined && this.leases[i] !== m.headLease
        : (this.leases[i] ?? m.lease!) < m.lease!);
      for (let i = this.out.length - 1; i >= 0; i--) {
        if (!drop(i)) continue;
        this.out.splice(i, 1);
        this.leases.splice(i, 1);
      }
    }
    if (m.fence || m.seq === 0 || m.epoch !== this.epoch) return;
    if (m.seq <= (this.out.at(-1)?.seq ?? this.since)) return;
    this.out.push({ seq: m.seq, at, frame: frame() });
    this.leases.push(m.lease);
  }

  /** Every frame from since + 1 to `last`, consecutive: the replay is whole. */
  wholeTo(last: number): boolean {
    return !this.rewound && this.out.length === last - this.since && this.out.every((e, i) => e.seq === this.since + 1 + i);
  }
}
