// The account host: one AccountEntry (connection actor + BrokerConnection) per bound account
// this shard owns, the AccountRegistry other hosts of the shard use, the classic operations and
// idempotent trading. First in HOST_FACTORIES, so ctx.accounts is set before other hosts start.
import { apiError, ApiError, brokerRefused } from '../../errors.js';
import { SecretBox } from '../../crypto/secretBox.js';
import { passwordOf, type BrokerConnection, type BrokerCredentials } from '../../broker/types.js';
import { BrokerAuthError, BrokerError, BrokerRequestError } from '../../market/brokerErrors.js';
import { AccountStore, type BindingRow } from '../../store/accounts.js';
import { AuditStore } from '../../store/audit.js';
import { writeTransaction } from '../../store/db.js';
import { IdempotencyStore } from '../../store/idempotency.js';
import { fullDiskOf } from '../../store/fullDisk.js';
import { ACCOUNT_BINDING_EVENT, ACCOUNT_PHASE_EVENT, type AccountStatus, type BindArgs, type HeldCopy } from './accountCommands.js';
import { AccountEntry, type EntryDeps } from './accountEntry.js';
import { createBrokerSource, type BrokerSource } from './accountBroker.js';
import { assertAvailable, runOp } from './accountOps.js';
import { summaryOrLastKnown, type AccountRegistry } from './accountRegistry.js';
import { TradeDesk } from './accountTrade.js';
import { brokerRequestId, lookedUpElsewhere, tradeRecordedElsewhere } from './tradeRequest.js';
import { marketNowOf, type ActorHost, type ShardContext } from './context.js';

/** Accounts started per turn of the shard's event loop while a restart restores them. */
const RESTORE_SLICE = 256;

export interface AccountHostOptions {
  /** Tests inject a broker source; the default is the embedded simulator. */
  broker?: BrokerSource;
  now?: () => number;
}

export function createAccountHost(ctx: ShardContext, opts: AccountHostOptions = {}): ActorHost {
  const store = AccountStore.of(ctx.db);
  const audits = new AuditStore(ctx.db);
  const desk = new TradeDesk(new IdempotencyStore(ctx.db, ctx.clock, { log: ctx.log }), ctx.log, ctx.clock, fullDiskOf(ctx));
  const hex = ctx.settings.secretKeyHex;
  const box = hex ? new SecretBox(Buffer.from(hex, 'hex')) : undefined;
  const now = opts.now ?? (() => ctx.clock.now());
  let source: BrokerSource | undefined = opts.broker;
  const broker = (): BrokerSource => (source ??= createBrokerSource(ctx));
  const entries = new Map<string, AccountEntry>();
  /** The embedded simulator's fault controls. In bridge mode the faults live in the simulator
   *  process (its servers file): every fault route refuses, as an empty list would tell the
   *  operator that none are active. */
  const simFaults = (): Required<Pick<BrokerSource, 'injectFault' | 'clearFaults' | 'listFaults'>> => {
    const b = broker();
    if (!b.injectFault || !b.clearFaults || !b.listFaults) throw apiError('BAD_REQUEST', 'fault injection needs the embedded simulator: this gateway runs BROKER_MODE=bridge, ' +
      'where a simulator process takes its faults from its servers file ("faults": [...] per server, npm run sim -- --config FILE; docs/simulator.md)');
    return b as Required<Pick<BrokerSource, 'injectFault' | 'clearFaults' | 'listFaults'>>;
  };
  // One for every account of the shard: nothing in it is an account's own (issue 19, memory per idle account).
  const entryDeps: EntryDeps = {
    log: ctx.log,
    factory: (c: BrokerCredentials): BrokerConnection => broker().factory(c),
    backoffBaseMs: ctx.settings.timing.reconnectBaseMs,
    backoffCapMs: ctx.settings.timing.reconnectCapMs,
    brokerWaitMs: ctx.settings.timing.brokerWaitMs,
    connectingWaitMs: ctx.settings.timing.connectingWaitMs ?? ctx.settings.timing.brokerWaitMs,
    onPhase: (accountId, phase, was, server) => {
      // Operators see it in /metrics (the main thread counts accounts per phase) and here.
      ctx.emit({ kind: ACCOUNT_PHASE_EVENT, key: accountId, data: phase });
      if (phase === 'reconnecting' && was !== 'refused') ctx.log.warn('broker connection lost; reconnecting', { accountId, server });
      else if (phase === 'refused') ctx.log.warn('broker refused the stored login; no automatic retry (bind again or /CheckConnect)', { accountId, server });
      else if (phase === 'connected' && (was === 'reconnecting' || was === 'refused')) ctx.log.info('broker connection restored', { accountId, server });
    },
    onLoginFailed: (accountId, reason) => ctx.emit({ kind: ACCOUNT_PHASE_EVENT, key: accountId, data: { failed: reason } }),
    onServer: (accountId, server) => {
      // Bound while the broker could not be asked (bridge unreachable): the server says which it is.
      const row = store.get(accountId);
      if (row && row.server === server.name && row.platform !== server.platform) {
        ctx.log.warn('account platform corrected by its broker server', { accountId, was: row.platform, is: server.platform });
        store.upsert({ ...row, platform: server.platform, updated_at: now() });
        ctx.emit({ kind: ACCOUNT_BINDING_EVENT, key: accountId, data: null });
      }
    },
  };

  /** Server names and platforms as one string each, however many accounts read them from their
   *  rows (a copy per row otherwise, ~60 B per account; issue 19). Few: one per server. */
  const names = new Map<string, string>();
  const interned = <S extends string>(v: S): S => {
    const had = names.get(v);
    if (had !== undefined) return had as S;
    names.set(v, v);
    return v;
  };

  /** The binding's credentials with the password kept sealed: a connection unseals it each time it
   *  logs in and drops it after, so no account holds it in plain text while it lives. Opened once
   *  here, so a key that cannot open it fails the start or bind, as before. */
  const credentialsOf = (row: Pick<BindingRow, 'seat_id' | 'server' | 'login' | 'password_enc' | 'platform'>): BrokerCredentials => {
    if (!box) throw apiError('INTERNAL_ERROR', 'no secret key configured in this shard');
    const sealed = row.password_enc;
    const aad = row.seat_id;
    const password = (): string => {
      try {
        return box.open(sealed, aad);
      } catch (err) {
        throw apiError('TERMINAL_ERROR', "the account's stored broker credentials cannot be read (secret key changed?); bind it again with /ConnectEx", { cause: err });
      }
    };
    password();
    return { server: interned(row.server), login: row.login, password, platform: interned(row.platform) };
  };

  const startEntry = (row: BindingRow): AccountEntry => {
    const e = new AccountEntry(row.seat_id, row.customer_id, { credentials: credentialsOf(row), build: row.build }, entryDeps);
    entries.set(row.seat_id, e);
    try {
      e.start();
    } catch (err) {
      entries.delete(row.seat_id);
      throw err;
    }
    return e;
  };

  /**
   * A restart brings every bound account back, but not before the shard answers: with tens of
   * thousands of accounts, starting them all first kept the gateway from listening for most of a
   * minute. They start in slices between other work instead; an account asked for before its
   * turn starts at once (entryOf / ensure), and its connection phase says where it is meanwhile.
   */
  const restoring = new Set<{ cancel(): void }>();
  const restoreInBackground = (): { cancel(): void } => {
    let after = '';
    let restored = 0;
    let failed = 0;
    let timer: NodeJS.Immediate | undefined;
    const slice = () => {
      // The bindings are read a page per turn too: nothing per account runs before the shard answers.
      const rows = store.livePage(after, RESTORE_SLICE);
      for (const row of rows) {
        after = row.seat_id;
        if (entries.has(row.seat_id) || !ctx.owns(row.seat_id)) continue;
        try {
          startEntry(row);
          restored++;
        } catch (err) {
          failed++;
          ctx.log.error('cannot restore account connection', { accountId: row.seat_id, err });
        }
      }
      timer = rows.length === RESTORE_SLICE ? setImmediate(slice) : undefined;
      if (!timer) {
        restoring.delete(handle);
        // Failures are mostly passwords the secret key does not open (startupChecks.ts stops at the first that does).
        if (failed > 0) ctx.log.error('accounts restored; some could not be (see each one above: bind them again with /ConnectEx)', { restored, failed });
        else if (restored > 0) ctx.log.info('accounts restored', { restored });
      }
    };
    const handle = { cancel: () => timer && clearImmediate(timer) };
    timer = setImmediate(slice);
    restoring.add(handle);
    return handle;
  };
  // Cluster mode: an account whose lease this node does not hold is never started here (the
  // router sent the call on a stale owner; the caller retries on the real one).
  const assertOwned = (id: string) => {
    if (ctx.leased && !ctx.owns(id)) {
      throw apiError('SERVICE_UNAVAILABLE', `account ${id} is not held by this node (it is moving between nodes); retry`, { headers: { 'retry-after': '1' } });
    }
  };

  const registry: AccountRegistry = {
    get: (id) => entries.get(id),
    async ensure(id) {
      const e = entries.get(id);
      if (e) return e;
      assertOwned(id);
      const row = ctx.owns(id) ? store.getLive(id) : undefined;
      if (!row) throw apiError('NOT_FOUND', 'account not found');
      return startEntry(row);
    },
    open: (c) => broker().factory(c),
  };
  ctx.accounts = registry;

  /** The entry of a bound account; a seat without a broker login is "not connected". */
  const entryOf = (id: string): AccountEntry => {
    const e = entries.get(id);
    if (e) return e;
    assertOwned(id);
    const row = store.get(id);
    if (!row) throw apiError('NOT_CONNECTED', 'this account has no broker login bound yet: call /ConnectEx with id=<accountUUID>');
    // A removed seat's connection is not started again (a request that passed a main-thread cache).
    if (!store.getLive(id)) throw apiError('NOT_FOUND', 'account not found');
    return startEntry(row);
  };

  const status = (e: AccountEntry): AccountStatus => ({
    accountId: e.accountId, platform: e.platform, server: e.server.name, build: e.build, phase: e.phase(), state: e.state(),
    generation: e.generation,
  });

  /** Resolves once the entry's current connection connected, was refused, or `ms` passed. */
  const settle = async (e: AccountEntry, ms: number) => {
    try {
      await e.whenConnected(ms);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
    }
  };

  /** A connection of their own for credentials to be tried on (an unknown server: 400). */
  const probeOf = (credentials: BrokerCredentials): BrokerConnection => {
    try {
      return broker().factory(credentials);
    } catch (err) {
      throw err instanceof BrokerError ? apiError('BAD_REQUEST', err.message) : err;
    }
  };
  /** The embedded simulator's copy of a login no entry here binds goes (BrokerSource.letGo): the
   *  login's next account may run in another shard, with its own simulator over the same store.
   *  Returned: the login, when its copy could not go (a full disk): the main thread keeps other
   *  shards from loading it until this one let it go (HeldCopies, sim.release). */
  const letGoUnbound = ({ server, login }: HeldCopy): HeldCopy | undefined => {
    const letGo = source?.letGo;
    if (!letGo) return undefined;
    // Bound to an account this shard runs: its copy stays. An indexed lookup, not a walk of the
    // entries (a shard may run 50,000; a bind's probe comes here).
    const bound = store.boundTo(server, login);
    const e = bound && entries.get(bound.seat_id);
    if (e && e.credentials.server === server && e.credentials.login === login) return { server, login };
    const gone = letGo(server, login);
    // The faults its accounts here set on it end with them (not the operator's, set in every shard):
    // kept, they came back only if the login's next account landed on this shard.
    const k = loginKey(server, login);
    for (const id of accountFaults.get(k) ?? []) simFaults().clearFaults(undefined, undefined, id);
    accountFaults.delete(k);
    return gone ? undefined : { server, login };
  };
  /** The ids of the faults set through this shard's accounts (account.fault), by server and login. */
  const accountFaults = new Map<string, number[]>();
  const loginKey = (server: string, login: string) => `${server}\u0000${login}`;
  /** Logs the probe in and out: the broker's refusal as the API's; false when the broker cannot be reached now. */
  const tryLogin = async (probe: BrokerConnection, credentials: BrokerCredentials): Promise<boolean> => {
    try {
      await probe.connect();
      return true;
    } catch (err) {
      if (err instanceof BrokerAuthError) throw brokerRefused();
      // The broker (a bridge) answered and refused the login's server: as in embedded mode, where
      // the factory throws for an unknown server, nothing is bound.
      if (err instanceof BrokerRequestError) throw apiError('BAD_REQUEST', err.message);
      // Reached, but it speaks another version of the bridge protocol: nothing the caller can fix,
      // and binding anyway would leave an account that never connects. Bindings made before keep
      // retrying, so they recover once the operator runs matching releases.
      if (err instanceof BrokerError && err.code === 'BROKER_PROTOCOL') {
        throw apiError('TERMINAL_ERROR', `the broker bridge refused this gateway's protocol (${err.message}): run a simulator and a gateway of the same release`);
      }
      return false;
    } finally {
      await probe.disconnect().catch(() => undefined);
      letGoUnbound(credentials);
    }
  };

  const bind = async (a: BindArgs): Promise<AccountStatus & { heldCopy?: HeldCopy }> => {
    const password_enc = a.passwordEnc;
    const t = now();
    const prev = store.get(a.accountId);
    const row: BindingRow = {
      seat_id: a.accountId, customer_id: a.customerId, platform: a.platform ?? 'P5', server: a.server, login: a.login,
      password_enc, build: a.build ?? null, created_at: prev?.created_at ?? t, updated_at: t,
    };
    const credentials = credentialsOf(row);
    // Try the credentials on a connection of their own first: a wrong password or an unknown
    // server must not replace a working binding.
    const probe = probeOf(credentials);
    let existing = entries.get(a.accountId);
    const sameLogin = existing && existing.credentials.server === a.server && existing.credentials.login === a.login;
    // The same login with another password is tried first too: replacing the binding straight
    // away stored a refused password over the working one (400 to the caller, and every request
    // after it 503 'the broker refused the stored login', restarts included).
    const samePassword = sameLogin && passwordOf(existing!.credentials.password) === passwordOf(credentials.password);
    // Unreachable right now: bind anyway, the connection actor keeps retrying with backoff.
    if (!samePassword) await tryLogin(probe, credentials);
    // Known once connected (a bridge learns it from the server's hello). A bridge that could not be
    // reached cannot tell: the given platform (else P5) is taken unverified, and corrected from the
    // server once the account connects (deps.onServer).
    const platform = sameLogin ? existing!.platform : probe.serverKnown === false ? (a.platform ?? row.platform) : probe.server.platform;
    if (a.platform && platform !== a.platform) {
      throw apiError('BAD_REQUEST', `server ${a.server} is a ${platform} server, not ${a.platform}`);
    }
    row.platform = platform;
    // The probe took a round trip to the broker: in cluster mode the account may have left this
    // node meanwhile (nothing to bind here: the caller retries on its owner), or left and come back,
    // started again from its binding before: the bind is for the entry that runs it now.
    assertOwned(a.accountId);
    existing = entries.get(a.accountId);
    writeTransaction(ctx.db, () => {
      store.upsert(row);
      if (a.audit) audits.add(a.audit);
    });
    let heldCopy: HeldCopy | undefined;
    if (existing) {
      const was = existing.credentials;
      await existing.replace({ credentials, build: row.build });
      if (!sameLogin) heldCopy = letGoUnbound(was);
    } else {
      existing = startEntry(row);
    }
    await settle(existing, a.waitMs ?? ctx.settings.timing.bindWaitMs);
    if (existing.authFailed) {
      // Started from its binding before this call came (cluster mode: the owner runs the binding
      // PostgreSQL has), so nothing tried the login above: the broker's own answer, an unknown
      // server 400 BAD_REQUEST naming it, not a refused password (cluster-unknown-server.test.ts).
      if (samePassword) await tryLogin(probe, credentials);
      throw brokerRefused();
    }
    return heldCopy ? { ...status(existing), heldCopy } : status(existing);
  };

  return {
    handlers: {
      'account.bind': bind,
      // The broker's check of a login and password, binding nothing (a login bound to another
      // customer's account, tried with a password that is not the stored one: classicBinding.ts).
      'account.probe': async ({ accountId, server, login, passwordEnc, platform }) => {
        const c = credentialsOf({ seat_id: accountId, server, login, password_enc: passwordEnc, platform: platform ?? 'P5' });
        return { reached: await tryLogin(probeOf(c), c) };
      },
      'account.status': ({ accountId }) => status(entryOf(accountId)),
      // Its seat was removed (DELETE /v1/seats/{id}): the broker connection closes; the binding,
      // orders and idempotency records stay as history.
      'account.remove': ({ accountId }) => {
        const e = entries.get(accountId);
        entries.delete(accountId);
        e?.stop();
        const heldCopy = e && letGoUnbound(e.credentials);
        return heldCopy ? { stopped: e !== undefined, heldCopy } : { stopped: e !== undefined };
      },
      'sim.release': (copy) => ({ held: letGoUnbound(copy) !== undefined }),
      'account.upgrade': async ({ accountId, build, audit }) => {
        const e = entryOf(accountId);
        const row = store.get(accountId)!;
        const nextBuild = build === undefined ? row.build : build;
        // The build it records and the action's audit row commit together, before the connection is replaced.
        writeTransaction(ctx.db, () => {
          if (build !== undefined) store.setBuild(accountId, build, now());
          if (audit) audits.add(audit);
        });
        await e.replace({ credentials: e.credentials, build: nextBuild });
        await settle(e, ctx.settings.timing.bindWaitMs);
        return status(e);
      },
      'account.check': async ({ accountId }) => {
        const e = entryOf(accountId);
        e.check();
        await settle(e, ctx.settings.timing.checkWaitMs);
        return { ...status(e), connected: e.phase() === 'connected' };
      },
      'account.fault': ({ accountId, fault }) => {
        const e = entryOf(accountId);
        const id = simFaults().injectFault({ ...fault, server: e.server.name, login: e.credentials.login });
        const k = loginKey(e.server.name, e.credentials.login);
        const live = new Set(simFaults().listFaults().map((f) => f.id)); // those that ran their course go
        accountFaults.set(k, [...(accountFaults.get(k) ?? []).filter((x) => live.has(x)), id]);
        return { id };
      },
      'account.faults': ({ accountId }) => {
        const e = entryOf(accountId);
        return simFaults().listFaults().filter((f) => f.server === e.server.name && f.login === e.credentials.login);
      },
      'account.faults.clear': ({ accountId, id }) => {
        const e = entryOf(accountId);
        return { cleared: simFaults().clearFaults(e.server.name, e.credentials.login, id) };
      },
      'sim.faults.set': ({ fault, shared }) => ({ id: simFaults().injectFault(fault, shared) }),
      'sim.faults.clear': ({ server, id }) => ({ cleared: simFaults().clearFaults(server, undefined, id) }),
      'sim.faults.list': () => simFaults().listFaults(),
      'account.op': async ({ accountId, op, args }) => {
        const e = entryOf(accountId);
        if (op === 'AccountSummary') {
          return summaryOrLastKnown(e, async () => {
            const lease = await e.acquire();
            try {
              return await lease.conn.accountSummary();
            } finally {
              lease.release();
            }
          });
        }
        const lease = await e.acquire();
        try {
          assertAvailable(op, e.platform, lease.build);
          return await runOp(op, args, { conn: lease.conn, platform: e.platform, now: opts.now?.() ?? marketNowOf(ctx, lease.conn.server) });
        } finally {
          lease.release();
        }
      },
      // Cluster mode: the record is the ledger's in PostgreSQL (FencedShards); none is kept here.
      // Not an async function: it would wrap the trade's own promise in one more (~0.3 KB an order).
      'account.trade': ({ accountId, op, args, clientOrderId, ledgerExpiresAt }) => {
        try {
          return clientOrderId !== undefined && ledgerExpiresAt !== undefined
            ? tradeRecordedElsewhere(entryOf(accountId), op, args, brokerRequestId(accountId, clientOrderId, ledgerExpiresAt))
            : desk.trade(entryOf(accountId), op, args, clientOrderId);
        } catch (err) {
          return Promise.reject(err);
        }
      },
      'account.lookupTrade': ({ accountId, clientOrderId, ledgerExpiresAt }) => lookedUpElsewhere(entryOf(accountId), brokerRequestId(accountId, clientOrderId, ledgerExpiresAt)),
    },
    rehydrate() {
      // The accounts start after this returns (restoreInBackground); counted here are the
      // idempotency records with work left, restored before the shard answers.
      restoreInBackground();
      return desk.rehydrate(ctx.owns, now());
    },
    release(ids) {
      desk.release(ids);
      let n = 0;
      for (const id of ids) {
        const e = entries.get(id);
        if (!e) continue;
        entries.delete(id);
        e.stop();
        n++;
      }
      return n;
    },
    actorCount: () => entries.size + desk.count(),
    stop() {
      for (const r of restoring) r.cancel();
      desk.stop();
      for (const e of entries.values()) e.stop();
      entries.clear();
      source?.stop();
    },
  };
}
