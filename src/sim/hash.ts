// Stateless integer hashing and a small seeded PRNG. The market is a pure function of
// (seed, symbol, tick index), so every random number it uses comes from hashing those
// integers rather than from a sequential generator: any tick can be computed directly.

/** 32-bit finalizer (murmur3 fmix32). */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Hash of three integers; inputs may exceed 32 bits (they are folded). */
export function hash3(a: number, b: number, c: number): number {
  const bHi = Math.floor(b / 4294967296);
  let h = mix32(a ^ 0x9e3779b9);
  h = mix32(h ^ (b >>> 0) ^ Math.imul(bHi, 0x27d4eb2f));
  h = mix32(h ^ Math.imul(c, 0x165667b1));
  return h;
}

/** Uniform [0, 1) from a 32-bit hash. */
export function unit(h: number): number {
  return h / 4294967296;
}

/** FNV-1a of a string, for turning names into seeds. */
export function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return mix32(h);
}

/** mulberry32: small, fast, good enough for fault probabilities and synthetic walks. */
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Approximately standard normal (sum of four uniforms, rescaled). */
  normal(): number {
    return (this.next() + this.next() + this.next() + this.next() - 2) * 1.7320508;
  }
}
