// Which idempotency ids may have a record, in memory: a claim of an id that certainly has none
// (nearly every order: clients send a new clientOrderId each time) skips its SQLite lookup, a read
// transaction of its own whose locks (fcntl on the -shm file) cost ~4 µs of the shard's ~40 per
// order (issue 19). A Bloom filter: "no" is certain, "maybe" (a recorded id, or a false positive)
// asks SQLite as before. Every id written is added before its record can exist; nothing is taken
// out except a whole generation whose records have all expired (an hour past the last expiry,
// against a clock stepped back). Past its capacity a generation keeps filling until the previous
// one may go: false positives grow (more lookups), never false negatives.
import type { Clock } from '../util/clock.js';

const HASHES = 4;
/** A generation (2 MiB, two at most per shard) stays under ~0.2% false positives up to its
 *  capacity (16 bits an id), ~3% at twice it, ~22% at four times. */
const BITS = 1 << 24;
const CAPACITY = 1_000_000;
const EXPIRY_MARGIN_MS = 3_600_000;

class Generation {
  readonly words = new Uint32Array(BITS / 32);
  count = 0;
  /** The latest expiry of the records whose ids it holds. */
  maxExpires = 0;
}

/** Two 32-bit FNV-1a hashes of `${accountId}\u0000${id}` (different offsets), for double hashing,
 *  left in h1 and h2: the key is read in its two parts, and no string or pair is made per order. */
let h1 = 0;
let h2 = 0;
function hashes(accountId: string, id: string): void {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ 0x5bd1e995;
  for (let k = 0; k < 3; k++) {
    const part = k === 0 ? accountId : k === 1 ? '\u0000' : id;
    for (let i = 0; i < part.length; i++) {
      const c = part.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
  }
  // As int32 (small integers, not heap numbers): holds() and add() use them modulo 2^32 alike.
  h1 = a | 0;
  h2 = b | 1;
}

export class ClaimedIds {
  private current: Generation | undefined;
  private previous: Generation | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly capacity = CAPACITY,
  ) {}

  /** Before a record of the id can exist (its insert), whatever becomes of it. */
  add(accountId: string, id: string, expiresAt: number): void {
    let g = this.current;
    if (!g || (g.count >= this.capacity && (!this.previous || this.previous.maxExpires + EXPIRY_MARGIN_MS <= this.clock.now()))) {
      this.previous = g;
      g = this.current = new Generation();
    }
    hashes(accountId, id);
    for (let i = 0; i < HASHES; i++) {
      const bit = (h1 + Math.imul(i, h2)) & (BITS - 1);
      g.words[bit >>> 5]! |= 1 << (bit & 31);
    }
    g.count++;
    if (expiresAt > g.maxExpires) g.maxExpires = expiresAt;
  }

  /** False: no record of the id was written since this started (or was added). */
  mayHold(accountId: string, id: string): boolean {
    if (!this.current) return false;
    hashes(accountId, id);
    return holds(this.current, h1, h2) || (this.previous !== undefined && holds(this.previous, h1, h2));
  }
}

function holds(g: Generation, h1: number, h2: number): boolean {
  for (let i = 0; i < HASHES; i++) {
    const bit = (h1 + Math.imul(i, h2)) & (BITS - 1);
    if ((g.words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false;
  }
  return true;
}
