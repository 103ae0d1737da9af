// Where each request id of an account's last day is in the journal: the row's [time, seq] by id.
// Kept for a day per order, so kept flat: a Map from the id to a slot, and the slots' times and
// seqs in typed arrays. A [time, seq] array per id cost 64 bytes in two objects (and a boxed
// time), held for the day; every young-generation scavenge before its promotion copied them
// (issue 19). Observably a Map<string, JournalRef> (requestRefs.property.test.ts).
import type { JournalRef } from './simDirty.js';
import { JsonText } from '../util/jsonText.js';

/** The request batches' writer: one text at a time. */
const batchText = new JsonText();

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

  /** JSON.stringify(ids.map((id) => [id, ...this.get(id)])), the checkpoint's row of these ids,
   *  written without an array per id (src/util/jsonText.ts). Every id must be known. */
  batchJson(ids: readonly string[]): string {
    const w = batchText.begin().raw('[');
    for (let k = 0; k < ids.length; k++) {
      const i = this.slots.get(ids[k]!)!;
      w.raw(k === 0 ? '[' : ',[').str(ids[k]!).raw(',').num(this.times[i]!).raw(',').num(this.seqs[i]!).raw(']');
    }
    w.raw(']');
    return w.failed ? JSON.stringify(ids.map((id) => [id, ...this.get(id)!])) : w.text();
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
