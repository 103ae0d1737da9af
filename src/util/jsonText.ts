// JSON text of known shape written into one reused byte buffer and read out as one flat string.
// Built with `+` or a template, an order's answer (~0.6 KB) was ~70 cons strings and number
// strings, and the journal row's JSON.stringify of positional arrays the arrays and its builder's
// parts: ~4 KB and ~2 KB of young-generation garbage per order (issue 19: every scavenge the
// shard meets is a slow order). Here the text costs its final string and the odd number string.
//
// Only what JSON.stringify writes byte for byte is written: printable ASCII strings with nothing
// to escape, finite numbers (others are null, as JSON.stringify has them), null, booleans. Any
// other value sets `failed`, and the caller writes that text the generic way.

/** A writer of such text; one per thread, one text at a time (`begin` … `text`). */
export class JsonText {
  private buf = Buffer.allocUnsafe(2048);
  private n = 0;
  /** A value was met that this writer does not write as JSON.stringify would: use the generic way. */
  failed = false;

  /** Starts a new text (the buffer is reused: one text at a time). */
  begin(): this {
    this.n = 0;
    this.failed = false;
    return this;
  }

  /** The text written since `begin`. */
  text(): string {
    return this.buf.toString('latin1', 0, this.n);
  }

  private room(k: number): void {
    if (this.n + k <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.n + k));
    this.buf.copy(grown, 0, 0, this.n);
    this.buf = grown;
  }

  /** Text known to need no escaping (a literal piece of the shape, an ISO date): as it is. */
  raw(s: string): this {
    const len = s.length;
    this.room(len);
    const b = this.buf;
    let n = this.n;
    for (let i = 0; i < len; i++) b[n++] = s.charCodeAt(i);
    this.n = n;
    return this;
  }

  /** A string value: quoted, if it is printable ASCII with no quote or backslash; else `failed`. */
  str(s: string): this {
    const len = s.length;
    this.room(len + 2);
    const b = this.buf;
    let n = this.n;
    b[n++] = 0x22;
    for (let i = 0; i < len; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
        this.failed = true;
        return this;
      }
      b[n++] = c;
    }
    b[n++] = 0x22;
    this.n = n;
    return this;
  }

  /** A number as JSON.stringify writes it (safe integers digit by digit, without a string). */
  num(x: number): this {
    if (Number.isSafeInteger(x)) {
      const v = x < 0 ? -x : x;
      let digits = 1;
      for (let p = 10; p <= v; p *= 10) digits++;
      this.room(digits + 1);
      const b = this.buf;
      if (x < 0) b[this.n++] = 0x2d;
      const end = this.n + digits;
      this.n = end;
      // In parts of nine digits, each below 2^31: their digits come from integer arithmetic. Digit by
      // digit on the whole number (a millisecond instant, 13 digits), `v % 10` was a double modulo,
      // a call into C per digit (issue 19: a tenth of the shard's JSON time).
      if (v < BILLION) {
        intDigits(b, end, v, 1);
      } else {
        // A safe integer has at most 16 digits: the high part is below 2^31 too.
        const hi = Math.floor(v / BILLION);
        intDigits(b, end, v - hi * BILLION, 9);
        intDigits(b, end - 9, hi, 1);
      }
      return this;
    }
    return this.raw(Number.isFinite(x) ? String(x) : 'null');
  }

  /** A plain object of such values as JSON.stringify writes it: its own enumerable keys in their
   *  order, undefined values left out; any other object, key or value sets `failed`. */
  obj(o: object): this {
    if (Object.getPrototypeOf(o) !== Object.prototype) {
      this.failed = true;
      return this;
    }
    const r = o as Record<string, unknown>;
    let first = true;
    this.raw('{');
    // for-in over a plain object lists its own enumerable string keys, in JSON.stringify's order.
    for (const k in r) {
      const v = r[k];
      if (v === undefined) continue;
      if (!first) this.raw(',');
      this.str(k).raw(':').value(v);
      first = false;
    }
    return this.raw('}');
  }

  /** `new Date(ms).toISOString()` quoted, for whole ms from 1970 to 9999 (no Date, no string made);
   *  false, with nothing written, for any other instant. */
  isoTime(ms: number): boolean {
    if (!Number.isSafeInteger(ms) || ms < 0 || ms >= MAX_ISO_MS) return false;
    // Civil date from days since 1970-01-01 (H. Hinnant's civil_from_days, years >= 0).
    const days = Math.floor(ms / DAY_MS);
    let t = ms - days * DAY_MS;
    const z = days + 719_468;
    const era = Math.floor(z / 146_097);
    const doe = z - era * 146_097;
    const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
    const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
    const mp = Math.floor((5 * doy + 2) / 153);
    const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
    const month = mp < 10 ? mp + 3 : mp - 9;
    const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
    const milli = t % 1000;
    t = (t - milli) / 1000;
    const sec = t % 60;
    t = (t - sec) / 60;
    const min = t % 60;
    const hour = (t - min) / 60;
    this.room(26);
    const b = this.buf;
    const n = this.n;
    b[n] = 0x22;
    digits(b, n + 1, year, 4);
    b[n + 5] = 0x2d;
    digits(b, n + 6, month, 2);
    b[n + 8] = 0x2d;
    digits(b, n + 9, day, 2);
    b[n + 11] = 0x54;
    digits(b, n + 12, hour, 2);
    b[n + 14] = 0x3a;
    digits(b, n + 15, min, 2);
    b[n + 17] = 0x3a;
    digits(b, n + 18, sec, 2);
    b[n + 20] = 0x2e;
    digits(b, n + 21, milli, 3);
    b[n + 24] = 0x5a;
    b[n + 25] = 0x22;
    this.n = n + 26;
    return true;
  }

  /** Any value of a positional record: a number, a string, null (also for undefined, as in an
   *  array), a boolean; anything else sets `failed`. */
  value(v: unknown): this {
    if (typeof v === 'number') return this.num(v);
    if (typeof v === 'string') return this.str(v);
    if (v === null || v === undefined) return this.raw('null');
    if (typeof v === 'boolean') return this.raw(v ? 'true' : 'false');
    this.failed = true;
    return this;
  }
}

const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00Z: from there toISOString writes a six-digit, signed year. */
const MAX_ISO_MS = 253_402_300_800_000;

const BILLION = 1_000_000_000;

/** `v` (an integer from 0 to 2^31 - 1) in decimal, zero-padded to at least `width` digits, its
 *  last digit at `end - 1`. */
function intDigits(b: Buffer, end: number, v: number, width: number): void {
  let i = end;
  const first = end - width;
  do {
    const q = (v / 10) | 0;
    b[--i] = 0x30 + (v - q * 10);
    v = q;
  } while (v > 0 || i > first);
}

/** `v` as `width` decimal digits, zero-padded, at `at`. */
function digits(b: Buffer, at: number, v: number, width: number): void {
  for (let i = at + width - 1; i >= at; i--) {
    b[i] = 0x30 + (v % 10);
    v = (v - (v % 10)) / 10;
  }
}
