// Shard commands of the account host (issue 4), merged into the runtime's CommandMap. Kept in a
// types-only module so the HTTP routes (main thread) and the host (shard) share one definition.
import type { TradeOp } from '../../market/orderSchemas.js';
import type { Platform } from '../../market/server.js';
import type { Fault, FaultKind } from '../../sim/faults.js';
import type { ConnectionPhase } from './accountRegistry.js';
import type { NewAuditRow } from '../../store/audit.js';

export interface BindArgs {
  accountId: string;
  customerId: string;
  /** Given by the client; checked against the server's actual platform. */
  platform?: Platform;
  server: string;
  login: string;
  /** Sealed with the gateway's secret box (aad = accountId); the plain password never crosses threads. */
  passwordEnc: string;
  /** Terminal build of the connection; null/undefined = the server's own build. */
  build?: number | null;
  /** How long to wait for the first connect before answering (ms). */
  waitMs?: number;
  /** A management action's row (account.bind), written with the binding it records (one node: in
   *  the shard's SQLite transaction; cluster mode: the owner takes it off and writes it with the
   *  binding's copy to PostgreSQL), once under its `ref`. */
  audit?: NewAuditRow;
}

export interface AccountStatus {
  accountId: string;
  platform: Platform;
  server: string;
  /** Effective terminal build of the current connection. */
  build: number;
  phase: ConnectionPhase;
  /** Connection actor state, e.g. "connected", "reconnecting.waiting", "authFailed". */
  state: string;
  /** Incremented by every rolling upgrade or re-bind. */
  generation: number;
}

/** A login whose simulated copy a shard could not let go (its checkpoint could not be written: a
 *  full disk): it stays in that shard, inert, until written; no other shard may load the login
 *  meanwhile (the main thread's HeldCopies, docs/simulator.md "one copy of a login"). */
export interface HeldCopy {
  server: string;
  login: string;
}

/** Shard event (key: account id, data: OperatorPhase) on every change of an account's
 *  connection phase; the main thread counts accounts per phase for /metrics. Also (data:
 *  LoginFailed) at each failed login attempt, which changes no phase: the operator's last error. */
export const ACCOUNT_PHASE_EVENT = 'acct.phase';
/** A connection phase as operators see it: `refused` is a login the broker refused (no retry). */
export type OperatorPhase = ConnectionPhase | 'refused';
/** A login attempt of the account failed: why (loginFailure.ts: never the password). */
export interface LoginFailed { failed: string }
export const OPERATOR_PHASES: readonly OperatorPhase[] = ['connecting', 'connected', 'reconnecting', 'refused'];
/** Shard event (key: account id) when the shard changed an account's binding in its SQLite outside
 *  a command: its broker server corrected the platform at a login after the bind. One node has
 *  nothing to do; in cluster mode the owner copies the binding to PostgreSQL. */
export const ACCOUNT_BINDING_EVENT = 'acct.binding';


export interface FaultArgs {
  kind: FaultKind;
  durationMs?: number;
  latencyMs?: number;
  count?: number;
  probability?: number;
  lookupFailMs?: number;
}

export interface TradeReply {
  status: number;
  /** The response body, JSON text (see StoredResult). */
  json: string;
  /** True when this is the stored answer of an earlier request with the same clientOrderId. */
  replay: boolean;
}

declare module '../protocol.js' {
  interface CommandMap {
    /** `heldCopy`: the login the account left (a re-bind to another login), whose copy stays in this shard. */
    'account.bind': { args: BindArgs; result: AccountStatus & { heldCopy?: HeldCopy } };
    /** Tries a login and password at the broker on a connection of its own and binds nothing:
     *  BROKER_AUTH_FAILED when refused; `reached: false` when the broker cannot be reached now.
     *  `accountId` routes it (the account the login is bound to) and is the aad of `passwordEnc`. */
    'account.probe': { args: Pick<BindArgs, 'accountId' | 'server' | 'login' | 'passwordEnc' | 'platform'>; result: { reached: boolean } };
    'account.status': { args: { accountId: string }; result: AccountStatus };
    /** Stops the connection of an account whose seat was removed. */
    'account.remove': { args: { accountId: string }; result: { stopped: boolean; heldCopy?: HeldCopy } };
    /** Lets this shard's simulated copy of a login go now if no account of it binds the login (its
     *  checkpoint written first). `held`: it stays (the disk is still full, or an account here binds it). */
    'sim.release': { args: HeldCopy; result: { held: boolean } };
    'account.op': { args: { accountId: string; op: string; args: Record<string, unknown> }; result: unknown };
    /** `ledgerExpiresAt` (cluster mode, with `clientOrderId`): the order's idempotency record is the
     *  cluster ledger's, claimed and fenced in PostgreSQL before this call and expiring then; the shard
     *  keeps none of its own and sends with that record's broker request id. */
    'account.trade': { args: { accountId: string; op: TradeOp; args: Record<string, unknown>; clientOrderId?: string; ledgerExpiresAt?: number }; result: TradeReply };
    /** Cluster mode: what the broker did with the order of a ledger record (clientOrderId, expiring
     *  at `ledgerExpiresAt`) an earlier owner sent and never settled: its answer, or null if unknown. */
    'account.lookupTrade': { args: { accountId: string; clientOrderId: string; ledgerExpiresAt: number }; result: TradeReply | null };
    /** `audit`: the action's row, written with the build it records (one node: in the shard's SQLite
     *  transaction; cluster mode: the owner takes it off and writes it with the binding's copy). */
    'account.upgrade': { args: { accountId: string; build?: number | null; audit?: NewAuditRow }; result: AccountStatus };
    'account.check': { args: { accountId: string }; result: AccountStatus & { connected: boolean } };
    /** Simulator fault injection on this account's login (tests, benchmarks). */
    'account.fault': { args: { accountId: string; fault: FaultArgs }; result: { id: number } };
    /** The faults set on this account's login (not the server-wide ones), in this shard's simulator: the
     *  one its connection runs on. */
    'account.faults': { args: { accountId: string }; result: Fault[] };
    /** Clears them, or the one `id` names if it is one of them. */
    'account.faults.clear': { args: { accountId: string; id?: number }; result: { cleared: number } };
    /** Server-wide simulator faults. Every shard runs its own copy of the simulator, so these go to each
     *  shard; `shared`: a count's one Int32 over a SharedArrayBuffer, the same in every shard (one count). */
    'sim.faults.set': { args: { fault: FaultArgs & { server: string; login?: string }; shared?: Int32Array }; result: { id: number } };
    /** Those of a server, or the one `id` names (an operator's login fault its account's customer ended). */
    'sim.faults.clear': { args: { server?: string; id?: number }; result: { cleared: number } };
    'sim.faults.list': { args: Record<string, never>; result: Fault[] };
  }
  interface ShardEventMap {
    /** key: the account id. A phase change, or a login attempt that failed and why (LoginFailed). */
    'acct.phase': OperatorPhase | LoginFailed;
    /** key: the account id. */
    'acct.binding': null;
  }
}
