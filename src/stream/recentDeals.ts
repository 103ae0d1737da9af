// The recent deals a DealLedger (deals.ts) remembers: ticket -> broker time, at most `cap` of them,
// the one noted longest ago forgotten first: what a Map with delete-then-set and its first key evicted
// did, in two typed arrays and no object per deal. A Map of 4,096 numbers held ~290 KiB (V8 sizes it
// at 8,192 entries of three slots, and each time above 2^31 is a boxed number); this holds 80 KiB
// when full (a ring of [ticket, time] doubles and a 16-bit open-addressing index at half load), and
// grows from nothing, so an account with few deals holds little. Pure: no I/O.

/** Index buckets per ring slot (a linear-probing table at most half full). */
const LOAD = 2;
/** The first ring's slots; a ring of at most SCAN slots has no index (a scan of it is as quick). */
const FIRST = 4;
const SCAN = 16;
const NO_RING = new Float64Array(0);
const NO_INDEX = new Uint16Array(0);

export class RecentDeals {
  /** [ticket, time] of each slot, oldest at `tail`; a hole's ticket is NaN (a deal noted again since). */
  private ring = NO_RING;
  /** Ring slot + 1 of each noted ticket, by its hash; 0 empty. None while the ring is small. */
  private index: Uint16Array | Uint32Array = NO_INDEX;
  private shift = 32;
  private tail = 0;
  /** Slots in use from `tail` on (live and holes). */
  private used = 0;
  private live = 0;

  constructor(private readonly cap: number) {
    if (!Number.isInteger(cap) || cap < 1) throw new RangeError(`RecentDeals cap ${cap}`);
  }

  get size(): number {
    return this.live;
  }

  /** The broker time noted with `ticket`, or undefined. */
  get(ticket: number): number | undefined {
    const s = this.slotOf(ticket);
    return s < 0 ? undefined : this.ring[2 * s + 1];
  }

  /** Remembers `ticket` with `time` as the newest (a ticket noted before moves up, its time replaced);
   *  past `cap`, the oldest is forgotten. */
  note(ticket: number, time: number): void {
    if (Number.isNaN(ticket)) return; // no broker's ticket (NaN marks a hole here)
    const held = this.slotOf(ticket);
    if (held >= 0) this.forget(held);
    if (this.live === this.cap) this.evictOldest();
    const slots = this.ring.length / 2;
    if (this.used === slots) this.relayout(slots < this.cap ? Math.min(this.cap, Math.max(FIRST, slots * 2)) : slots);
    const slot = (this.tail + this.used) % (this.ring.length / 2);
    this.ring[2 * slot] = ticket;
    this.ring[2 * slot + 1] = time;
    this.used++;
    this.live++;
    if (this.index.length > 0) this.place(ticket, slot + 1);
  }

  private slotOf(ticket: number): number {
    if (this.index.length > 0) {
      const b = this.bucketOf(ticket);
      return b < 0 ? -1 : this.index[b]! - 1;
    }
    const slots = this.ring.length / 2;
    for (let k = 0, s = this.tail; k < this.used; k++, s = s + 1 === slots ? 0 : s + 1) if (this.ring[2 * s] === ticket) return s;
    return -1;
  }

  /** Slot `s` (live) becomes a hole. */
  private forget(s: number): void {
    if (this.index.length > 0) this.unindex(this.bucketOf(this.ring[2 * s]!));
    this.ring[2 * s] = NaN;
    this.live--;
  }

  private hash(ticket: number): number {
    // Low and high 32 bits of an integer ticket (any double hashes to something; equality decides).
    return Math.imul((ticket >>> 0) ^ ((ticket / 4294967296) >>> 0), 0x9e3779b1) >>> this.shift;
  }

  /** The index bucket holding `ticket`, or -1. */
  private bucketOf(ticket: number): number {
    const idx = this.index;
    if (idx.length === 0) return -1;
    const mask = idx.length - 1;
    for (let b = this.hash(ticket); ; b = (b + 1) & mask) {
      const v = idx[b]!;
      if (v === 0) return -1;
      if (this.ring[2 * (v - 1)] === ticket) return b;
    }
  }

  private place(ticket: number, value: number): void {
    const idx = this.index;
    const mask = idx.length - 1;
    let b = this.hash(ticket);
    while (idx[b] !== 0) b = (b + 1) & mask;
    idx[b] = value;
  }

  /** Empties bucket `b`, moving later entries of its probe run back (no tombstones). */
  private unindex(b: number): void {
    const idx = this.index;
    const mask = idx.length - 1;
    let gap = b;
    for (let j = (b + 1) & mask; idx[j] !== 0; j = (j + 1) & mask) {
      const home = this.hash(this.ring[2 * (idx[j]! - 1)]!);
      // The entry at j may move to the gap unless its home lies cyclically in (gap, j].
      const stays = gap <= j ? home > gap && home <= j : home > gap || home <= j;
      if (!stays) {
        idx[gap] = idx[j]!;
        gap = j;
      }
    }
    idx[gap] = 0;
  }

  private evictOldest(): void {
    const slots = this.ring.length / 2;
    while (Number.isNaN(this.ring[2 * this.tail]!)) {
      this.tail = (this.tail + 1) % slots;
      this.used--;
    }
    this.forget(this.tail);
    this.tail = (this.tail + 1) % slots;
    this.used--;
  }

  /** A ring of `slots` with the live deals from slot 0 in their order, and its index rebuilt. */
  private relayout(slots: number): void {
    const old = this.ring;
    const oldSlots = old.length / 2;
    const ring = new Float64Array(2 * slots);
    let n = 0;
    for (let k = 0; k < this.used; k++) {
      const s = (this.tail + k) % oldSlots;
      if (Number.isNaN(old[2 * s]!)) continue;
      ring[2 * n] = old[2 * s]!;
      ring[2 * n + 1] = old[2 * s + 1]!;
      n++;
    }
    this.ring = ring;
    this.tail = 0;
    this.used = n;
    if (slots <= SCAN) return void (this.index = NO_INDEX);
    const buckets = 1 << Math.ceil(Math.log2(slots * LOAD));
    if (this.index.length !== buckets) {
      this.index = slots < 0xffff ? new Uint16Array(buckets) : new Uint32Array(buckets);
      this.shift = 32 - Math.log2(buckets);
    } else this.index.fill(0);
    for (let s = 0; s < n; s++) this.place(ring[2 * s]!, s + 1);
  }
}
