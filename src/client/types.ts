// Request and response types of every route, derived from the zod schemas the server validates
// with (type-only imports: nothing of the server is bundled, the browser build stays free of it).
// Query values travel as text, so a parameter's type here is what the SDK can write for it: the
// schema's parsed type for scalars, lists as arrays, times as Date, ISO text or epoch ms.
import type { z } from 'zod';
import type { READ_ROUTE_DEFS, TRADE_FIELDS } from '../http/routes/classic.js';
import type { CLASSIC_RESPONSE_SCHEMAS } from '../http/routes/classicResponses.js';
import type { ConnectExBody, ConnectExReply } from '../http/routes/connectEx.js';
import type { BrokerAccount, BrokerAccountBody, ConnectBody, ConnectReply } from '../http/routes/gateway.js';
import type { CalendarEventSchema, NewsQuery } from '../http/routes/news.js';
import type { AuditEntry, KeyInfo, KeyListQuery, ReplacedKey, RotatedKey } from '../http/routes/management.js';
import type { CreatedKey, KeyBody, Seat, SeatBody } from '../http/routes/provisioning.js';
import type { OPERATION_DEFS } from '../http/routes/proxySchemas.js';
import type { ClientMessageInput } from '../stream/protocol.js';
import type { AccountFaultBody, AccountFaultReply, AccountFaultList, SimFaultBody, SimFaultList, SimFaultReply } from '../http/routes/faults.js';

type Scalar = string | number | boolean;
/** A time parameter: a Date, ISO 8601 text, or epoch ms (classic routes also take seconds). */
export type TimeInput = Date | string | number;
type TimeKeys = 'from' | 'to' | 'expiration';

/** What the SDK can send for a parameter named K, parsed to V by a schema whose input type is I:
 *  I itself where the schema says what it takes (`accepting` in src/http/schemas.ts: a timeframe's
 *  minutes as well as its name), else what V's text is (query text has no type of its own, so I is
 *  `unknown` there). */
type Sendable<V, I, K> = K extends TimeKeys
  ? TimeInput
  : unknown extends I
    ? V extends readonly (infer E)[]
      ? readonly (E extends Scalar ? E : string)[]
      : V extends Scalar ? V : TimeInput
    : Exclude<I, undefined> extends infer A ? (A extends readonly (infer E)[] ? readonly E[] : A) : never;

type IsOptional<F> = F extends z.ZodOptional<any> | z.ZodDefault<any> ? true : false;

/** The shape of an object schema, through the preprocess/transform pipes around it. */
type ShapeOf<S> = S extends z.ZodObject<infer Sh>
  ? Sh
  : S extends z.ZodPipe<infer A, infer B>
    ? ([ShapeOf<B>] extends [never] ? ShapeOf<A> : ShapeOf<B>)
    : never;

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** Parameters of a shape, without the ones the SDK fills itself (the account id, the handle). */
export type ParamsOf<Sh, Omit extends PropertyKey = 'id' | 'accountId' | 'handle'> = Simplify<
  { [K in Exclude<keyof Sh, Omit> as IsOptional<Sh[K]> extends true ? never : K]: Sendable<NonNullable<z.output<Sh[K]>>, z.input<Sh[K]>, K> } &
  { [K in Exclude<keyof Sh, Omit> as IsOptional<Sh[K]> extends true ? K : never]?: Sendable<NonNullable<z.output<Sh[K]>>, z.input<Sh[K]>, K> }
>;

// ---- classic routes -------------------------------------------------------------------------

type ReadDef = (typeof READ_ROUTE_DEFS)[number];
export type ClassicReadName = ReadDef['path'] | 'GetQuote' | 'CheckConnect' | 'Ping';
export type ClassicTradeName = keyof typeof TRADE_FIELDS;
export type ClassicName = ClassicReadName | ClassicTradeName;

type ReadShape<N> = Extract<ReadDef, { path: N }> extends infer D
  ? (D extends { fields: infer F } ? F : {}) & (D extends { many: true } ? { symbols: z.ZodArray<z.ZodString> } : {})
  : never;

export type ClassicParams<N extends ClassicName> = N extends ClassicTradeName
  ? ParamsOf<(typeof TRADE_FIELDS)[N]>
  : N extends 'GetQuote'
    ? { symbol: string; cached?: '0' | '1' }
    : N extends 'CheckConnect' | 'Ping'
      ? {}
      : ParamsOf<ReadShape<N>>;

type ResponseSchemas = typeof CLASSIC_RESPONSE_SCHEMAS;
/** The route's response, where the server declares its schema; JSON otherwise. */
export type ClassicResponse<N extends ClassicName> = N extends keyof ResponseSchemas ? z.output<ResponseSchemas[N]> : Json;

// ---- gateway routes (/v1/proxy/<Operation>) ---------------------------------------------------

type Ops = typeof OPERATION_DEFS;
export type ProxyOperation = keyof Ops;
type PlatformSchemas<O extends ProxyOperation> = Ops[O] extends infer D
  ? (D extends { P5: infer S } ? S : never) | (D extends { P4: infer S } ? S : never)
  : never;
/** Parameters of an operation on either platform (the gateway checks the session's own). */
export type ProxyParams<O extends ProxyOperation> = PlatformSchemas<O> extends infer S ? (S extends unknown ? ParamsOf<ShapeOf<S>> : never) : never;
export type ProxyKind = Ops[ProxyOperation]['kind'];

// ---- provisioning, connection, news -------------------------------------------------------------

export type SeatInput = z.input<typeof SeatBody>;
export type SeatInfo = z.output<typeof Seat>;
export type KeyInput = z.input<typeof KeyBody>;
export type NewKey = z.output<typeof CreatedKey>;
export type KeyListEntry = z.output<typeof KeyInfo>;
export type KeyListParams = z.input<typeof KeyListQuery>;
export type ReplacedKeyInfo = z.output<typeof ReplacedKey>;
export type RotatedManagementKey = z.output<typeof RotatedKey>;
export type AuditLogEntry = z.output<typeof AuditEntry>;
export type BrokerAccountInput = z.input<typeof BrokerAccountBody>;
export type BrokerAccountInfo = z.output<typeof BrokerAccount>;
export type ConnectInput = z.input<typeof ConnectBody>;
export type ConnectResult = z.output<typeof ConnectReply>;
export type ConnectExInput = z.input<typeof ConnectExBody>;
export type ConnectExResult = z.output<typeof ConnectExReply>;
export type NewsParams = ParamsOf<ShapeOf<typeof NewsQuery>>;
export type CalendarEvent = z.output<typeof CalendarEventSchema>;
/** A simulator fault on one account (docs/simulator.md, Faults). */
export type AccountFaultInput = z.input<typeof AccountFaultBody>;
export type AccountFaultInfo = z.output<typeof AccountFaultReply>;
export type AccountFaultListing = z.output<typeof AccountFaultList>;
/** A simulator fault on a whole server, or one login on it (operator only). */
export type SimFaultInput = z.input<typeof SimFaultBody>;
export type SimFaultInfo = z.output<typeof SimFaultReply>;
export type SimFaultListing = z.output<typeof SimFaultList>;

/** A candle timeframe of a /v1/stream subscription, as the gateway reads it: a name (M1, H4, any
 *  case) or its minutes (1, 240). */
export type StreamTimeframe = NonNullable<ClientMessageInput['timeframes']>[number];

export type { TimeframeInput } from '../market/timeframes.js';
export type { OrderTypeInput } from '../market/orders.js';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type JsonObject = { [k: string]: Json };
