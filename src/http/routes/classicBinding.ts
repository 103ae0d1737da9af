// Binding a broker login to an account, shared by /ConnectEx and POST /v1/seats (kept apart from
// both route files so neither imports the other). The password is sealed here, in the main thread,
// with AES-256-GCM (aad = the account id) and only the sealed form reaches the shard and SQLite.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { seatStatusAt } from '../../../actors/seatStatus.js';
import type { Platform } from '../../market/server.js';
import { apiError, brokerRefused, toApiError } from '../../errors.js';
import type { AccountStatus } from '../../runtime/hosts/accountCommands.js';
import type { Services } from '../services.js';
import { AccountStore, type BindingRow } from '../../store/accounts.js';
import { errorMessage } from '../../util/errorMessage.js';
import type { ActionAudit } from '../route.js';
import type { NewAuditRow } from '../../store/audit.js';
import { clearHeldCopy, noteHeldCopy } from './heldCopies.js';
import { holderInCluster, inUse, isLoginInUse, loginInUse, openedOrUndefined, samePassword, takenInCluster } from './loginInUse.js';
import { onePer } from '../../util/onePer.js';
import { AdmissionQueue } from '../../util/admissionQueue.js';

export const BrokerFields = {
  user: z.string().min(1).max(64).describe('Broker login. Never returned.'),
  password: z.string().min(1).max(256).describe('Broker password. Encrypted at rest, never returned or logged.'),
  server: z.string().min(1).max(128).describe('Broker server name, e.g. Sim-P5-Demo'),
  platform: z.enum(['P4', 'P5']).optional().describe('Checked against the server; inferred from it when omitted'),
  build: z.number().int().min(1).max(100_000).optional().describe('Terminal build of the connection (default: the server build); endpoints newer than it answer 501'),
};

export interface BindInput {
  accountId: string;
  customerId: string;
  user: string;
  password: string;
  server: string;
  platform?: Platform | undefined;
  build?: number | undefined;
  /** The bind's audit row (account.bind, a management key's /ConnectEx): written with the binding. */
  audit?: NewAuditRow | undefined;
  /** The key asking (its id): the node's admission queue of logins serves the keys in turn. Absent: the customer. */
  requester?: string | undefined;
}

/** The account's binding with the password sealed, and the call that has its shard verify and bind the login. */
function sealed(s: Services, b: BindInput): { row: BindingRow; bind: () => Promise<AccountStatus> } {
  const passwordEnc = s.secretBox.seal(b.password, b.accountId);
  const now = s.clock.now();
  return {
    row: {
      seat_id: b.accountId, customer_id: b.customerId, platform: b.platform ?? 'P5', server: b.server, login: b.user,
      password_enc: passwordEnc, build: b.build ?? null, created_at: now, updated_at: now,
    },
    bind: async () => {
      // Another shard still holding the login's simulated copy (a full disk kept it): not loaded twice (heldCopies.ts).
      await clearHeldCopy(s, { server: b.server, login: b.user }, b.accountId);
      return noteHeldCopy(s, b.accountId, await s.shards.call(b.accountId, 'account.bind', {
        accountId: b.accountId, customerId: b.customerId, server: b.server, login: b.user, passwordEnc,
        ...(b.platform ? { platform: b.platform } : {}), ...(b.build !== undefined ? { build: b.build } : {}),
        ...(b.audit ? { audit: b.audit } : {}),
      }, { retryOnRestart: true }));
    },
  };
}

/** Seals the password and has the account's shard verify and bind the login. Used by /ConnectEx and POST /v1/seats. */
export function bindBroker(s: Services, b: BindInput): Promise<AccountStatus> {
  const { row, bind } = sealed(s, b);
  return s.tenancyWrites.clustered ? bindInCluster(s, b, row, bind) : bind();
}

/**
 * Cluster mode: an account runs on the node holding its lease, and a lease exists only for a
 * binding in PostgreSQL. A new account's binding goes there first (a seat made with it: in the
 * seat's own commit, seatFirst; a seat that had none: here), the nodes are nudged, and the bind call
 * waits for the owner through the router. A login re-bound on
 * an existing account is held for it in PostgreSQL first (another account re-bound to the same
 * login at the same moment, on any node, gets 409 before its shard is asked); the owner's shard then
 * verifies and binds it, and the owner copies the binding to PostgreSQL before it answers
 * (BindingRecords: a refused password never replaces a working one there). Nothing here writes that
 * binding: a write from here could land after an /Upgrade the owner made meanwhile.
 */
async function bindInCluster(s: Services, b: BindInput, row: BindingRow, bind: () => Promise<AccountStatus>): Promise<AccountStatus> {
  // PostgreSQL checks the login again: another node may have bound it at the same moment.
  if (AccountStore.of(s.db).get(b.accountId)) {
    if (!(await s.tenancyWrites.reserveLogin(b.accountId, b.server, b.user))) await takenInCluster(s, b, b.accountId);
    try {
      return await bind();
    } finally {
      await s.tenancyWrites.releaseLogin(b.accountId, b.server, b.user)
        .catch((err: unknown) => s.log.warn('a held broker login not released; it expires by itself', { accountId: b.accountId, err: errorMessage(err) }));
    }
  }
  if (!(await s.tenancyWrites.createBinding(row))) await takenInCluster(s, b, b.accountId);
  return bind();
}

/**
 * Makes a new seat; given a binding (cluster mode), the seat, its state and the binding are one
 * commit, and a login PostgreSQL finds bound or held for another account makes nothing
 * (`loginInUse`). One commit: PostgreSQL going away between a seat's commit and its binding's
 * would leave a seat the client never got, and its retry would make a second one.
 */
export type CreateSeat<R> = (binding?: BindingRow) => Promise<R>;

/** Cluster mode: the seat with its binding in PostgreSQL first (one commit), then its owner binds
 *  the login; a refused login removes the seat again. */
async function seatFirst<R>(s: Services, b: BindInput, createSeat: CreateSeat<R>, audit?: ActionAudit): Promise<{ created: R; status: AccountStatus }> {
  const { row, bind } = sealed(s, b);
  const created = await createSeat(row);
  try {
    return { created, status: await bind() };
  } catch (err) {
    // An audited create had its seat.create row committed with the seat: its removal has its own.
    const undone = (keys: string[] | undefined) => (keys ? audit?.row(b.accountId, { revokedKeys: keys, error: toApiError(err).code }, 'seat.delete') : undefined);
    await s.tenancyWrites.removeSeat(b.accountId, b.customerId, s.clock.now(), undone).catch(() => undefined);
    throw err;
  }
}

/** The same fields, optional, for POST /v1/seats: all of user, password and server, or none. */
export const SeatBrokerFields = {
  user: BrokerFields.user.optional(),
  password: BrokerFields.password.optional(),
  server: BrokerFields.server.optional(),
  platform: BrokerFields.platform,
  build: BrokerFields.build,
};

/**
 * POST /v1/seats: binds the login when the body has broker fields, then creates the seat with
 * `createSeat`, both under the login's lock (a refused login creates nothing; a login bound to
 * another account answers 409).
 */
export async function bindSeatBroker<R>(
  s: Services, accountId: string, customerId: string,
  b: { user?: string | undefined; password?: string | undefined; server?: string | undefined; platform?: Platform | undefined; build?: number | undefined; requester?: string | undefined },
  createSeat: CreateSeat<R>,
  /** The route's audit (POST /v1/seats): a seat removed again because its login was refused is recorded too. */
  audit?: ActionAudit,
): Promise<R> {
  const given = [b.user, b.password, b.server].filter((x) => x !== undefined).length;
  if (given === 0) {
    if (b.platform !== undefined || b.build !== undefined) throw apiError('BAD_REQUEST', 'platform/build need user, password and server');
    return createSeat();
  }
  if (given !== 3) throw apiError('BAD_REQUEST', 'broker binding needs all of user, password and server');
  const input: BindInput = { accountId, customerId, user: b.user!, password: b.password!, server: b.server!, platform: b.platform, build: b.build, requester: b.requester };
  return withLoginLock(s, input.server, input.user, () => admitted(s, input, async () => {
    if (s.tenancyWrites.clustered) {
      await assertNotBoundElsewhere(s, input);
      // PostgreSQL refused the login (createSeat): the check its copy in this node's mirror gets.
      return (await seatFirst(s, input, createSeat, audit).catch((err: unknown) => (isLoginInUse(err) ? takenInCluster(s, input, accountId) : Promise.reject(err)))).created;
    }
    await bindUnlocked(s, input);
    return createSeat();
  }));
}

/** Seconds a creation refused by a full queue is told to wait (retry-after). */
export const CREATION_RETRY_AFTER_S = 1;
/**
 * A broker login (a new account, a re-bind, a seat made with a login) runs through the node's
 * admission queue: at most accountCreationConcurrency at once, the rest waiting, each key's in
 * arrival order and the keys in turn (one bot's bulk creation does not hold another's up), so a
 * customer creating accounts in bulk is paced instead of taking the CPU from every other
 * customer's requests (docs/scale.md, "The main thread during a creation ramp"). Taken under the
 * login's lock, before anything is written: a refusal (429 ACCOUNT_CREATION_BUSY) changed nothing.
 */
export const accountCreations = onePer((s: Services) => new AdmissionQueue(s.config.accountCreationConcurrency, s.config.accountCreationQueue, () =>
  apiError('ACCOUNT_CREATION_BUSY', `this key has too many accounts waiting to be created or bound on this node; nothing was done: retry after ${CREATION_RETRY_AFTER_S} s`, {
    headers: { 'retry-after': String(CREATION_RETRY_AFTER_S) }, details: { retryAfterMs: CREATION_RETRY_AFTER_S * 1000 },
  })));
const admitted = <T>(s: Services, b: Pick<BindInput, 'customerId' | 'requester'>, f: () => Promise<T>): Promise<T> => accountCreations(s).run(b.requester ?? b.customerId, f);

// One account per broker login. Each shard thread runs its own simulator copy, and an account's
// broker connection lives in the account's shard: two accounts of one login could sit in two
// shards and drive two diverging copies of that login (and, restarted, one copy's state would
// overwrite the other's). So a login already bound answers with its account (same customer) or
// 409 (another customer), and bindings of one login are serialized in this (main) thread, per
// gateway (a process runs one; tests run several, each as its own node). Across cluster nodes
// PostgreSQL checks it again (PgTenancy.upsertBinding).
const loginLocks = onePer((_: Services) => new Map<string, Promise<unknown>>());
const loginKey = (server: string, login: string) => `${server}\u0000${login}`;
function withLoginLock<T>(s: Services, server: string, login: string, f: () => Promise<T>): Promise<T> {
  return withLockKey(s, loginKey(server, login), f);
}
function withLockKey<T>(s: Services, k: string, f: () => Promise<T>): Promise<T> {
  const locks = loginLocks(s);
  const prev = locks.get(k) ?? Promise.resolve();
  const run = prev.then(f, f);
  const tail = run.catch(() => undefined);
  locks.set(k, tail);
  void tail.then(() => {
    if (locks.get(k) === tail) locks.delete(k);
  });
  return run;
}

/**
 * `f` under the lock of the login `accountId` is bound to now, which it may leave (a re-bind to
 * another login, its seat removed), and of `to`, the login it is bound to next (none for a removal).
 * The account's shard lets the login it leaves go only at the end of its call (a re-bind first
 * drains the trades in flight on the old connection; a removal stops it with account.remove), and
 * an account of that login in another shard loads its own copy as soon as it binds it: bound
 * meanwhile (the binding row said it was free), the other shard's copy missed what the first
 * booked after: a trade answered 200 was missing from the login's orders on its new account, two
 * copies writing the login's journal (login-moves-shard.test.ts). Locks taken in one order (two
 * accounts swapping logins wait for each other, no deadlock); the account's login read again once
 * they are held.
 */
export async function withAccountLogins<T>(s: Services, accountId: string, to: { server: string; login: string } | undefined, f: () => Promise<T>): Promise<T> {
  const bindings = AccountStore.of(s.db);
  const boundNow = () => {
    const b = bindings.get(accountId);
    return b ? loginKey(b.server, b.login) : undefined;
  };
  for (;;) {
    const was = boundNow();
    const keys = [...new Set([...(to ? [loginKey(to.server, to.login)] : []), ...(was === undefined ? [] : [was])])].sort();
    const locked = (i: number): Promise<{ done: true; value: T } | { done: false }> =>
      i < keys.length ? withLockKey(s, keys[i]!, () => locked(i + 1)) : boundNow() === was ? f().then((value) => ({ done: true, value })) : Promise.resolve({ done: false });
    const r = await locked(0);
    if (r.done) return r.value;
  }
}

export interface LoginAccount { id: string; status: AccountStatus | null; created: boolean }

/**
 * The account of a broker login for a customer: the existing one when the login is bound already
 * (the password must match the stored one; nothing is reconnected), else a new shared seat bound
 * to it (verified first: a refused login creates nothing).
 */
export function accountForLogin(
  s: Services, b: Omit<BindInput, 'accountId' | 'audit'>,
  /** The bind's audit row, for the account it binds (none when the login was bound already and nothing changed). */
  auditOf?: (accountId: string, newSeat: boolean) => NewAuditRow | undefined,
): Promise<LoginAccount> {
  return withLoginLock(s, b.server, b.user, async () => {
    const bound = AccountStore.of(s.db).boundTo(b.server, b.user);
    if (bound) return boundAccount(s, b, bound, auditOf);
    return admitted(s, b, () => newAccount(s, b, auditOf));
  });
}

/** A new shared seat bound to the login (verified first: a refused login creates nothing). */
async function newAccount(
  s: Services, b: Omit<BindInput, 'accountId' | 'audit'>, auditOf?: (accountId: string, newSeat: boolean) => NewAuditRow | undefined,
): Promise<LoginAccount> {
  const id = randomUUID();
  const createSeat: CreateSeat<void> = async (binding) => {
    const now = s.clock.now();
    const made = await s.tenancyWrites.insertSeat({ id, customer_id: b.customerId, private_hosting: 0, region: null, created_at: now },
      { seat_id: id, status: seatStatusAt(now, now), ready_at: now, updated_at: now }, binding);
    if (!made) throw loginInUse();
    await s.shards.call(id, 'seat.create', { seatId: id, readyAt: now });
  };
  if (s.tenancyWrites.clustered) {
    let status: AccountStatus;
    try {
      ({ status } = await seatFirst(s, { ...b, accountId: id, audit: auditOf?.(id, true) }, createSeat));
    } catch (err) {
      if (!isLoginInUse(err)) throw err;
      // PostgreSQL refused the login: another account has it, which this node's mirror may not
      // have yet (another node bound it a moment ago): the answer one node gives for a login
      // found bound, from PostgreSQL's binding (a hold, a re-bind in flight: in use).
      const h = await holderInCluster(s, b, id);
      if (h.password_enc === undefined || h.platform === undefined) return inUse(s, b, h);
      return boundAccount(s, b, { ...h, password_enc: h.password_enc, platform: h.platform }, auditOf);
    }
    return { id, status, created: true };
  }
  const status = await bindBroker(s, { ...b, accountId: id, audit: auditOf?.(id, true) });
  await createSeat();
  return { id, status, created: true };
}

/** A login already bound: its account (the password must match the stored one; nothing is reconnected). */
async function boundAccount(
  s: Services, b: Omit<BindInput, 'accountId' | 'audit'>, bound: Pick<BindingRow, 'seat_id' | 'customer_id' | 'password_enc' | 'platform'>,
  auditOf?: (accountId: string, newSeat: boolean) => NewAuditRow | undefined,
): Promise<LoginAccount> {
  if (bound.customer_id !== b.customerId) await inUse(s, b, bound);
  const stored = openedOrUndefined(s.secretBox, bound.password_enc, bound.seat_id);
  if (stored === undefined) {
    // Sealed with a key since reset (SECRET_KEY_RESET): the broker checks the password (and
    // the platform), and the password is sealed again with the current key.
    const status = await bindUnlocked(s, { ...b, accountId: bound.seat_id, audit: auditOf?.(bound.seat_id, false) });
    return { id: bound.seat_id, status, created: false };
  }
  if (!samePassword(stored, b.password)) throw brokerRefused();
  // The same check a new login gets in its shard: a given platform must match the server's.
  if (b.platform !== undefined && b.platform !== bound.platform) {
    throw apiError('BAD_REQUEST', `server ${b.server} is a ${bound.platform} server, not ${b.platform}`);
  }
  return { id: bound.seat_id, status: null, created: false };
}

/** Re-binding a given account: the login must not be bound to a different account; the one it
 *  leaves is locked too, until the account's shard has let it go (withAccountLogins). */
export function rebindAccount(s: Services, b: BindInput): Promise<AccountStatus> {
  return withAccountLogins(s, b.accountId, { server: b.server, login: b.user }, () => admitted(s, b, () => bindUnlocked(s, b)));
}

/** Refuses a login bound to another account than `b.accountId` in this node's SQLite (nothing when
 *  it is free or bound to it). */
async function assertNotBoundElsewhere(s: Services, b: BindInput): Promise<void> {
  const bound = AccountStore.of(s.db).boundTo(b.server, b.user);
  if (bound !== undefined && bound.seat_id !== b.accountId) await inUse(s, b, bound);
}

async function bindUnlocked(s: Services, b: BindInput): Promise<AccountStatus> {
  await assertNotBoundElsewhere(s, b);
  return bindBroker(s, b);
}
