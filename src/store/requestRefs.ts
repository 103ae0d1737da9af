// Where each request id of an account's last day is in the journal: the row's [time, seq] by id.
// Kept for a day per order, so kept flat: a Map from the id to a slot, and the slots' times and
// seqs in typed arrays. A [time, seq] array per id cost 64 bytes in two objects (and a boxed
// time), held for the day; every young-generation scavenge before its promotion copied them
// (issue 19). Observably a Map<string, JournalRef> (requestRefs.property.test.ts).
import type { JournalRef } from './simDirty.js';

export class RequestRefs {
  private readonly slots = new Map<string, number>();
  private times = new Float64Array(8);
  private seqs = new Float64Array(8);
  /** Slots used (some may be free again after prune: compacted there). */
  private used = 0;

  get size(): number {
    return this.slots.size;
  }

  has(id: string): boolean {
    return this.slots.has(id);
  }

  get(id: string): JournalRef | undefined {
    const i = this.slots.get(id);
    return i === undefined ? undefined : [this.times[i]!, this.seqs[i]!];
  }

  set(id: string, time: number, seq: number): void {
    let i = this.slots.get(id);
    if (i === undefined) {
      if (this.used === this.times.length) this.resize(this.times.length * 2);
      i = this.used++;
      this.slots.set(id, i);
    }
    this.times[i] = time;
    this.seqs[i] = seq;
  }

  /** Drops the ids whose row is older than `horizon` (the others keep their order). */
  prune(horizon: number): void {
    let j = 0;
    for (const [id, i] of this.slots) {
      if (this.times[i]! < horizon) {
        this.slots.delete(id);
        continue;
      }
      // Slots are handed out in the Map's order, so j <= i: moving down never overwrites a live slot.
      this.times[j] = this.times[i]!;
      this.seqs[j] = this.seqs[i]!;
      this.slots.set(id, j++);
    }
    this.used = j;
    if (this.times.length > 64 && j < this.times.length / 4) this.resize(Math.max(8, j * 2));
  }

  private resize(n: number): void {
    const t = new Float64Array(n);
    const s = new Float64Array(n);
    t.set(this.times.subarray(0, this.used));
    s.set(this.seqs.subarray(0, this.used));
    this.times = t;
    this.seqs = s;
  }
}
