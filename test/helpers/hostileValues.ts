// Hostile values for property tests of the HTTP and socket surfaces (http-fuzz, cluster-fuzz):
// numbers at their edges, odd strings, malformed escapes, near-UUIDs, JSON of any shape.
import fc from 'fast-check';

/** `arb` one time in `inN`, else undefined (fc.option's freq is the other way round: nil 1 in freq). */
export function sometimes<T>(arb: fc.Arbitrary<T>, inN: number): fc.Arbitrary<T | undefined> {
  return fc.oneof({ weight: inN - 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });
}

export const NUMERIC_EDGE = ['NaN', 'Infinity', '-Infinity', '-0', '0', '-1', '-0.01', '1e308', '1e309', '-1e309', '5e-324', '99999999999999999999999', '9007199254740993', '0x1F', '1,5', '1.5.5', ' 1', '1 ', '+1', '.5', '1e2', '0.0000001'];
export const ODD = ['', ' ', 'null', 'undefined', 'true', 'false', '[]', '{}', '[object Object]', '%', '%00', '%zz', '\u0000', '\t', '\r\n', '\u007f', 'é', '😀', '\ud800', '\u202e', '\ufeff', '../../etc/passwd', "' OR 1=1 --", '<script>x</script>', '${x}', '__proto__', 'constructor'];
/** Sent as they are, not encoded: malformed or overlong percent-escapes, and separators inside a value. */
export const RAW_ESCAPES = ['%zz', '%', '%2', '%ff', '%C0%AF', '%E0%A4%A', '%ED%A0%80', '%00', 'a&b=c', '+++', '%2B%2b', '=', '&&', ';'];
export const NOT_UUID = ['0', 'abc', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffffff', '{uuid}', '..', '%2e%2e'];

/**
 * fast-check's 'binary' string unit (any code point but a lone surrogate half), drawn exactly as
 * `fc.string({ unit: 'binary' })` draws it (the same index, the same mapping: equal strings for a
 * seed), with an unmapper that computes the index instead of looking it up. fast-check builds that
 * lookup, a Map of all 1.1 million code points, the first time a string of its unit is made (to
 * find which of its "dangerous" strings the unit can spell): ~3 CPU-s in each vitest worker that
 * loaded this file, a sixth of http-fuzz's CPU.
 */
export const BINARY_UNIT: fc.Arbitrary<string> = fc.nat({ max: 0x10ffff - 0x800 }).map(
  (i) => String.fromCodePoint(i < 0xd800 ? i : i + 0x800),
  (v) => {
    const cp = typeof v === 'string' ? v.codePointAt(0) : undefined;
    if (cp === undefined || String.fromCodePoint(cp) !== v || (cp >= 0xd800 && cp <= 0xdfff)) throw new Error('not one code point of the binary unit');
    return cp < 0xd800 ? cp : cp - 0x800;
  },
);

export const hostileString = fc.oneof(
  fc.constantFrom(...NUMERIC_EDGE, ...ODD, ...NOT_UUID),
  fc.string({ unit: BINARY_UNIT, maxLength: 24 }),
  fc.double().map(String),
  fc.integer({ min: -(2 ** 31), max: 2 ** 31 }).map(String),
  fc.bigInt({ min: -(10n ** 30n), max: 10n ** 30n }).map(String),
  // Overlong, but a head of at most a few KiB: uWS closes the connection unanswered on a head over
  // 4 KiB split across reads, in native code no route reaches (docs/http.md, http-framing.test.ts;
  // on loopback a head up to ~64 KiB mostly arrives in one read). Bodies go to 70 KB.
  fc.constantFrom(600, 5_000).map((n) => 'x'.repeat(n)),
);

export const jsonHostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -0, -1, 1e308, Number.MAX_SAFE_INTEGER + 2, '', 'x'.repeat(5_000), [], {}, [null], { a: { b: { c: [1, { d: null }] } } }),
  fc.string({ unit: BINARY_UNIT, maxLength: 16 }),
  fc.double(),
  fc.jsonValue({ maxDepth: 3 }),
);
