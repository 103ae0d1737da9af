// A route is data: method, path, auth mode and zod schemas, plus a handler. The same records
// drive request validation and the OpenAPI document, so the two cannot drift apart.
import type { z } from 'zod';
import type { AuthMode, Principal } from '../auth/authenticator.js';
import type { ErrorCode } from '../errors.js';
import type { NewAuditRow } from '../store/audit.js';
import type { Family } from './metrics.js';
import type { VaryingParam } from './queryMemo.js';
import type { RequestInfo } from './request.js';
import type { Reply } from './respond.js';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'any';

export interface RouteContext<Q, B> {
  req: RequestInfo;
  query: Q;
  body: B;
  principal: Principal | undefined;
  params: string[];
  /** Routes with `audit`: the action's row, for its change's transaction (TenancyWrites' `audit`). */
  audit?: ActionAudit | undefined;
}

/** Makes a management action's audit row; a handler that had one written with its change gets no
 *  second one after it (exchange.ts). */
export interface ActionAudit {
  /** The row: this action (or `action`, another one the request did: the removal of a seat whose
   *  login was refused) on `target`, by the request's management key, now. `detail`: never a secret. */
  row(target: string | null, detail?: Record<string, unknown>, action?: string): NewAuditRow;
  /** The request changed nothing (a /ConnectEx of a login bound already): no row. */
  none(): void;
}

export interface RouteDef<Q = unknown, B = unknown> {
  method: Method;
  /** uWS pattern: `/v1/seats/:id` */
  path: string;
  family: Family;
  auth: AuthMode;
  summary: string;
  /** The OpenAPI operationId (what generated clients name the method); default from method and path, see `operationIdOf`. */
  operationId?: string;
  description?: string;
  tags?: string[];
  query?: z.ZodType<Q>;
  /**
   * Query schemas for the OpenAPI document only, when the handler validates by itself (e.g. the
   * gateway proxy, whose parameters depend on the session's platform): their parameters are
   * merged, required only where every schema requires them.
   */
  docQuery?: z.ZodType[];
  /** Names of the docQuery schemas (e.g. the platform), for parameters only some of them require. */
  docQueryLabels?: string[];
  body?: z.ZodType<B>;
  response?: z.ZodType;
  /** Status of a successful reply (documented); null: the route never succeeds (a catch-all that
   *  only answers errors). */
  successStatus?: number | null;
  /** Other success statuses, with the same response body (e.g. 200 for "already exists" beside 201). */
  otherSuccess?: number[];
  errors?: ErrorCode[];
  /** A query parameter that differs in every call (an order's clientOrderId): validated queries are
   *  kept by the rest of the query, so a bot's repeated order is validated once (queryMemo.ts). */
  queryVaries?: VaryingParam;
  /** The query carries a secret (a broker password): its validated form is not memoized (kept in memory past the request). */
  secretQuery?: boolean;
  /** A trading call (SPEC §5.5): a read-only key gets 403 before anything else is looked at. */
  trading?: boolean;
  /** Counts toward the key's orders per second (KEY_ORDERS_PER_SEC), as `trading` routes do:
   *  for routes that send orders without being `trading` (the /v1/proxy trade operations). */
  orders?: boolean;
  /** Changes something although it is a GET (binds a login, subscribes, ends a session): like
   *  trading calls and every other method, it runs only once uWS has parsed the rest of the read it
   *  came in, so never on a connection uWS closes for pipelining (endOfRead.ts afterThisRead). */
  changesState?: boolean;
  /**
   * A management action, recorded in the audit log under this name (who: the management key id): in
   * its change's transaction when the handler gives `ctx.audit.row(...)` to its tenancy write, else
   * after it succeeds (target: the first path parameter, else the reply body's `id`). Only a
   * management key's request is recorded: on a route that takes API keys too (/ConnectEx), an API
   * key's request gets no `ctx.audit` and no row.
   */
  audit?: string;
  handler: (ctx: RouteContext<Q, B>) => Reply | Promise<Reply>;
}

export type AnyRoute = RouteDef<any, any>;

export function defineRoute<Q = undefined, B = undefined>(def: RouteDef<Q, B>): AnyRoute {
  return def as AnyRoute;
}
