// Shared zod pieces for query strings and bodies. Query values arrive as strings (or arrays of
// strings when repeated), so the helpers here convert them strictly: '' is not 0, 'abc' is an error.
import { z } from 'zod';
import { RETCODES, type RejectReason } from '../market/orders.js';
import { apiError } from '../errors.js';

/** Loose: some errors add detail fields (a broker rejection its `reason` and `retcode`; the proxy's
 *  symbol-limit 400 `count` and `limit`). */
export const ErrorBody = z.looseObject({
  error: z.string().describe('Stable error code, e.g. BAD_REQUEST'),
  message: z.string().describe('Human-readable explanation'),
  reason: z.enum(Object.keys(RETCODES) as [RejectReason, ...RejectReason[]]).optional()
    .describe('TRADE_REQUEST_ERROR only: why the broker rejected the trade (e.g. NO_MONEY, INVALID_STOPS)'),
  retcode: z.number().int().optional().describe('TRADE_REQUEST_ERROR only: the trade server return code'),
  final: z.boolean().optional()
    .describe('IDEMPOTENCY_UNCERTAIN only: true, the same clientOrderId answers this for as long as its record lives (look for the order, then use a new id); false, the broker could not be asked this time (send the same request again after retryAfterMs)'),
  retryAfterMs: z.number().int().optional().describe('RATE_LIMITED, and IDEMPOTENCY_UNCERTAIN with final false: how long to wait before trying again'),
}).meta({ id: 'Error' });

/** A single-valued parameter: repeated with the same value is that value; repeated with different
 *  values stays an array, which every scalar schema refuses (400 naming the parameter). Picking
 *  one silently turned `volume=0.01&volume=0.02` or two clientOrderIds into an order nobody meant. */
export const one = (v: unknown) => (Array.isArray(v) ? (v.every((x) => x === v[0]) ? v[0] : REPEATED) : v);
/** Stands for "given twice with different values": an object, so no scalar schema accepts it. */
const REPEATED = Object.freeze({ repeated: 'given more than once with different values' });

/** The answer to an alias given beside its parameter with another value: refused (naming the
 *  alias), never overruled by either. The classic query schemas, /ConnectEx and the /v1/stream
 *  upgrade all say it so. */
export const aliasConflict = (param: string) => `alias of '${param}', given with a different value; send one of them`;
export function assertAliasAgrees(param: string, alias: string, value: unknown, aliasValue: unknown): void {
  if (value !== undefined && aliasValue !== undefined && value !== aliasValue) throw apiError('BAD_REQUEST', `parameter '${alias}': ${aliasConflict(param)}`);
}

/** Schema params giving `message` for a parameter given twice with different values; zod's default for the rest. */
const onRepeat = (message: string) => ({ error: (iss: { input?: unknown }) => (iss.input === REPEATED ? message : undefined) });
export const repeated = onRepeat(REPEATED.repeated);

/** The closest known parameter name to a misspelt one (case, `_`/`-` and up to two typos apart), if any. */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const norm = (x: string) => x.toLowerCase().replace(/[_-]/g, '');
  const n = norm(name);
  let best: { k: string; d: number } | undefined;
  for (const k of known) {
    const d = editDistance(n, norm(k));
    if (d <= Math.min(2, Math.floor(n.length / 3)) && (!best || d < best.d)) best = { k, d };
  }
  return best?.k;
}
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row.push(Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = row;
  }
  return prev[b.length]!;
}

/**
 * A query schema that refuses parameters it does not know: the answer is 400 INVALID_PARAMETER
 * naming them (see `queryError` in validation.ts), with the nearest known name. Used where an ignored
 * parameter changes what happens: every trading route (a misspelt `stopLoss` opened a position
 * without its stop-loss), the /v1/proxy operations and /news. Read routes stay lenient. `noun`: what
 * the names are called in the message (the /v1/stream client messages have fields).
 */
export function strictParams<S extends z.ZodRawShape>(shape: S, noun = 'parameter') {
  const known = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) => (iss.code === 'unrecognized_keys' ? unknownNames(iss.keys, known, noun) : undefined),
  });
}

/** `unknown parameter 'heartBeat' (did you mean 'heartbeat'?)`, one per name. */
function unknownNames(names: readonly string[], known: readonly string[], noun: string): string {
  return names.map((k) => {
    const near = closestName(k, known);
    return `unknown ${noun} '${k}'${near ? ` (did you mean '${near}'?)` : ''}`;
  }).join('; ');
}

/** The sockets' upgrades (/v1/stream, /ws) take no schema: a parameter they do not take is refused as
 *  strictParams refuses one, 400 INVALID_PARAMETER with the nearest known name. Ignored, a misspelt
 *  `heartBeat=0` opened a socket with heartbeats and `Since=<pos>` a fresh stream instead of a resume.
 *  An empty name (`?id=x&`) is no parameter. */
export function assertKnownParams(query: Record<string, unknown>, known: readonly string[]): void {
  const unknown = Object.keys(query).filter((k) => k !== '' && !known.includes(k));
  if (unknown.length > 0) throw apiError('INVALID_PARAMETER', unknownNames(unknown, known, 'parameter'), { details: { parameters: unknown } });
}

/** A free-text order comment: at most COMMENT_MAX characters (brokers keep 31 or so; more is refused, not cut). */
export const COMMENT_MAX = 64;
export const qComment = () => z.preprocess(one, z.string(repeated).max(COMMENT_MAX, `at most ${COMMENT_MAX} characters`));

export const qString = () => z.preprocess(one, z.string(repeated).min(1));
/**
 * Types what a parameter takes where its parser takes more than it gives: a timeframe is read from
 * its minutes as well as its name, but parses to the name. Query text has no type of its own
 * (`z.input` of a preprocessed schema is `unknown`), so `z.input` of the schema becomes `I`, and the
 * SDK's parameter type (src/client/types.ts) is that instead of the parsed type. Type only: the
 * schema is returned as it is. `accepting<1 | 'M1'>()(schema)`.
 */
export const accepting = <I>() => <S extends z.ZodType>(schema: S): S & { _zod: { input: I } } => schema as S & { _zod: { input: I } };
/** One symbol: the parameter repeated with different values is refused, not "last wins" (which
 *  silently dropped the others); several symbols go to the *Many routes. */
export const qSymbol = () =>
  z.preprocess(one, z.string(onRepeat('one symbol (for several, use the *Many route or operation)')).min(1));
/** Plain decimal notation only: Number() would also take '0x10', '0b1', '0o7' and 'Infinity'. */
const DECIMAL = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
export const qInt = () =>
  z.preprocess((v) => {
    const s = one(v);
    return typeof s === 'string' && /^[+-]?\d+$/.test(s.trim()) ? Number(s) : s;
  }, z.number(repeated).int().refine(Number.isSafeInteger, 'must be an integer of at most 15 digits'));
export const qNumber = () =>
  z.preprocess((v) => {
    const s = one(v);
    return typeof s === 'string' && DECIMAL.test(s.trim()) && Number.isFinite(Number(s)) ? Number(s) : s;
  }, z.number(repeated));
/** Whether y-mo-d (month 1-12) is a day of the calendar: 2026-02-30 is not (Date would roll it over). */
export function isCalendarDate(y: number, mo: number, d: number): boolean {
  const day = new Date(Date.UTC(y, mo - 1, d));
  return day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d;
}
/** A ticket (order, position or deal id): a positive integer, typed the same on every route. */
export const qTicket = () => qInt().pipe(z.number().int().positive());
/** A lot count: positive, at most 100,000 (no instrument trades more in one order). */
export const qLots = () => qNumber().pipe(z.number().positive().max(100_000));
/** A price: positive, at most 1e12 (beyond any instrument's quote; larger would overflow margins). */
export const qPrice = () => qNumber().pipe(z.number().positive().max(1e12));
/** A price where 0 is MT's "none" (SL/TP not set, a market order's price): not negative, at most 1e12. */
export const qPriceOrNone = () => qNumber().pipe(z.number().min(0).max(1e12));
export const qBool = () =>
  z.preprocess((v) => {
    const s = one(v);
    if (s === 'true' || s === '1') return true;
    if (s === 'false' || s === '0') return false;
    return s;
  }, z.boolean(repeated));
/** Repeated (`a=X&a=Y`) or comma-separated (`a=X,Y`) lists. */
export const qList = () =>
  z.preprocess((v) => {
    if (v === undefined) return v;
    const parts = (Array.isArray(v) ? v : [v]).flatMap((s) => String(s).split(','));
    return parts.map((s) => s.trim()).filter((s) => s.length > 0);
  }, z.array(z.string()));
