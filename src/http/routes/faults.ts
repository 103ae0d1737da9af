// Fault injection into the embedded simulator, for benchmark harnesses and failure tests
// (issue 3): connection drops, added latency, trade rejects, "timeout after send", and mutes (the
// connection stays up, no ticks or candles arrive).
// Per account: the account owner's management key sets them; it, or an API key of the account that
// may trade, clears them (a read-only one lists them): a bot developer who set a fault on its own
// account must be able to end it. Per server: the operator only (the customer created on first
// start), since a server-wide fault reaches every customer's accounts there.
import { z } from 'zod';
import { assertAccountScope, assertCanTrade } from '../../auth/rights.js';
import { apiError } from '../../errors.js';
import { errorMessage } from '../../util/errorMessage.js';
import { FAULT_FIELDS, FAULT_KINDS, faultSpecProblem, type FaultKind } from '../../sim/faults.js';
import type { Services } from '../services.js';
import { AccountStore } from '../../store/accounts.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { qInt } from '../schemas.js';
import { ownedSeat } from './provisioning.js';

const FaultFields = {
  kind: z.enum(FAULT_KINDS)
    .describe('drop: connection outage; latency: added to every reply; reject / timeoutAfterSend / unknownAfterSend: trade requests; mute: connected, but no ticks or candles'),
  durationMs: z.number().int().min(1).max(3_600_000).optional().describe('drop: outage length; mute: how long no market data arrives; latency, reject, timeoutAfterSend: optional, when they end (without it: until cleared or their count is used up)'),
  latencyMs: z.number().int().min(1).max(60_000).optional().describe('latency: added per reply'),
  count: z.number().int().min(1).max(1_000_000).optional().describe('reject / timeoutAfterSend / unknownAfterSend: the next N trade requests'),
  probability: z.number().min(0).max(1).optional().describe('reject / timeoutAfterSend / unknownAfterSend: each trade request with this probability'),
  lookupFailMs: z.number().int().min(1).max(3_600_000).optional()
    .describe('unknownAfterSend (required, and for it only): how long after a trade it took the broker cannot be asked about it; the same clientOrderId answers 409 IDEMPOTENCY_UNCERTAIN final:false meanwhile'),
};

/** The bodies and answers of the fault routes (the SDK's types come from these). */
export const AccountFaultBody = z.object(FaultFields).strict();
export const AccountFaultReply = z.object({ accountId: z.string(), id: z.number(), kind: z.string() });
export const AccountFaultList = z.object({
  accountId: z.string(),
  faults: z.array(z.object({
    id: z.number(), kind: z.string(), createdMs: z.number().describe('when it was set (UTC epoch ms)'),
    durationMs: z.number().optional(), latencyMs: z.number().optional(), count: z.number().optional(), probability: z.number().optional(),
    remaining: z.number().optional().describe('reject / timeoutAfterSend / unknownAfterSend with a count: trade requests it still takes'),
    lookupFailMs: z.number().optional(), lookupFailUntil: z.number().optional().describe('unknownAfterSend: lookups fail until then (UTC epoch ms)'),
  })).describe("the faults set on this account's login; the operator's server-wide ones are not listed"),
});
export const SimFaultBody = z.object({ server: z.string().min(1), login: z.string().min(1).optional(), ...FaultFields }).strict();
export const SimFaultReply = z.object({ server: z.string(), kind: z.string(), shards: z.number() });
export const SimFaultList = z.object({ faults: z.array(z.object({ shard: z.number(), id: z.number(), server: z.string(), kind: z.string() }).passthrough()) });

type FaultBody = { kind: FaultKind; durationMs?: number | undefined; latencyMs?: number | undefined; count?: number | undefined; probability?: number | undefined; lookupFailMs?: number | undefined };

function checked(b: FaultBody) {
  const problem = faultSpecProblem(b);
  if (problem) throw apiError('BAD_REQUEST', problem.field ? `body field '${problem.field}': ${problem.message}` : `body: ${problem.message}`);
  const out: Record<string, unknown> = { kind: b.kind };
  for (const k of FAULT_FIELDS[b.kind]) if (b[k] !== undefined) out[k] = b[k];
  return out as { kind: FaultBody['kind']; durationMs?: number; latencyMs?: number; count?: number; probability?: number; lookupFailMs?: number };
}

export function faultRoutes(s: Services): AnyRoute[] {
  const operatorOnly = (customerId: string) => {
    if (customerId !== s.operatorCustomerId) throw apiError('FORBIDDEN', 'server-wide simulator faults are for the operator (the first customer) only');
  };
  /** The caller's customer's account (404 otherwise), within an API key's scope (403). */
  const ownAccount = (p: NonNullable<Parameters<typeof assertCanTrade>[0]>, id: string) => {
    const row = ownedSeat(s, p.customerId, id);
    assertAccountScope(p, row.id);
    return row;
  };
  const everyShard = <T>(f: (shard: number) => Promise<T>) => Promise.all(Array.from({ length: s.shards.size }, (_, i) => f(i)));
  const kept = keptSimFaults(s);
  return [
    defineRoute({
      method: 'post', path: '/v1/accounts/:id/faults', family: 'provisioning', auth: 'management', audit: 'account.fault', tags: ['simulator'],
      summary: "Inject a simulator fault on one account's broker login (embedded simulator only)",
      body: AccountFaultBody, successStatus: 201,
      response: AccountFaultReply,
      errors: ['BAD_REQUEST', 'NOT_FOUND'],
      handler: async ({ params, body, principal }) => {
        const row = ownedSeat(s, principal!.customerId, params[0]!);
        const fault = checked(body);
        const r = await s.shards.call(row.id, 'account.fault', { accountId: row.id, fault });
        return { status: 201, body: { accountId: row.id, id: r.id, kind: fault.kind } };
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/accounts/:id/faults', family: 'provisioning', auth: 'connection', tags: ['simulator'],
      summary: "The simulator faults set on one account's broker login (its customer's management key or API keys)",
      response: AccountFaultList,
      errors: ['BAD_REQUEST', 'NOT_FOUND', 'ACCOUNT_SCOPE'],
      handler: async ({ params, principal }) => {
        const row = ownAccount(principal!, params[0]!);
        const faults = await s.shards.call(row.id, 'account.faults', { accountId: row.id });
        // Not the login (SPEC §2: never returned) nor the server: what was set, and what is left of it.
        return { body: { accountId: row.id, faults: faults.map(({ server: _s, login: _l, ...f }) => f) } };
      },
    }),
    defineRoute({
      method: 'delete', path: '/v1/accounts/:id/faults', family: 'provisioning', auth: 'connection', audit: 'account.fault.clear', tags: ['simulator'],
      summary: "Clear the simulator faults set on one account's broker login, or one with ?faultId= (not a read-only key)",
      query: z.object({ faultId: qInt().pipe(z.number().int().min(1)).optional().describe('the id POST answered; without it, all of them') }),
      response: z.object({ cleared: z.number() }),
      errors: ['BAD_REQUEST', 'NOT_FOUND', 'ACCOUNT_SCOPE', 'READ_ONLY_KEY'],
      handler: async ({ params, query, principal }) => {
        const row = ownAccount(principal!, params[0]!);
        assertCanTrade(principal!);
        const r = await s.shards.call(row.id, 'account.faults.clear', { accountId: row.id, ...(query.faultId !== undefined ? { id: query.faultId } : {}) });
        // The operator's faults on its login among them: set in every shard, they end in every shard.
        const b = AccountStore.of(s.db).get(row.id);
        if (b) await kept.endOfLogin(b.server, b.login, s.shards.shardFor(row.id), query.faultId);
        return { body: r };
      },
    }),
    defineRoute({
      method: 'post', path: '/v1/sim/faults', family: 'provisioning', auth: 'management', audit: 'sim.fault.set', tags: ['simulator'],
      summary: 'Inject a simulator fault for a whole server, or one login on it (operator only)',
      body: SimFaultBody, successStatus: 201,
      response: SimFaultReply,
      errors: ['BAD_REQUEST', 'FORBIDDEN'],
      handler: async ({ body, principal }) => {
        operatorOnly(principal!.customerId);
        const fault = { ...checked(body), server: body.server, ...(body.login ? { login: body.login } : {}) };
        // One count for every shard (a SharedArrayBuffer reaches each thread as the same memory).
        const shared = fault.count === undefined ? undefined : new Int32Array(new SharedArrayBuffer(4)).fill(fault.count);
        await kept.set(fault, shared, (i) => s.shards.callShard(i, 'sim.faults.set', { fault, ...(shared ? { shared } : {}) }));
        return { status: 201, body: { server: body.server, kind: fault.kind, shards: s.shards.size } };
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/sim/faults', family: 'provisioning', auth: 'management', tags: ['simulator'],
      summary: 'Active simulator faults (operator only; each shard runs its own simulator copy, so each fault is listed per shard)',
      response: SimFaultList,
      errors: ['BAD_REQUEST', 'FORBIDDEN'],
      handler: async ({ principal }) => {
        operatorOnly(principal!.customerId);
        const lists = await everyShard((i) => s.shards.callShard(i, 'sim.faults.list', {}));
        return { body: { faults: lists.flatMap((l, shard) => l.map((f) => ({ shard, ...f }))) } };
      },
    }),
    defineRoute({
      method: 'delete', path: '/v1/sim/faults', family: 'provisioning', auth: 'management', audit: 'sim.fault.clear', tags: ['simulator'],
      summary: 'Clear simulator faults, of one server with ?server= (operator only)',
      query: z.object({ server: z.string().min(1).optional() }),
      response: z.object({ cleared: z.number() }),
      errors: ['BAD_REQUEST', 'FORBIDDEN'],
      handler: async ({ query, principal }) => {
        operatorOnly(principal!.customerId);
        kept.clear(query.server);
        const r = await everyShard((i) => s.shards.callShard(i, 'sim.faults.clear', query.server ? { server: query.server } : {}));
        return { body: { cleared: r.reduce((n, x) => n + x.cleared, 0) } };
      },
    }),
  ];
}

type SimFault = FaultBody & { server: string; login?: string };
interface KeptFault {
  fault: SimFault; shared: Int32Array | undefined; setAt: number; until: number; unanswered: Set<number>;
  /** Its id in each shard (what that shard's lists and account clears name it by). */
  ids: Array<number | undefined>;
}

/**
 * The operator's faults (POST /v1/sim/faults), kept in the main thread and set again in a shard
 * whose thread died and came back (ShardSet.onRestart), for what is left of their duration: each
 * shard runs its own simulator, and a restarted one held none of them while the others kept theirs
 * (a fault on the accounts of some shards only). A shard that had not answered the set yet (down
 * meanwhile) gets it from that call, not twice. A fault with a `count` goes on with the count the
 * shards share (what is left of it). Account faults are not kept (one shard's, as before).
 */
function keptSimFaults(s: Services) {
  const kept = new Set<KeptFault>();
  const live = (k: KeptFault, now: number) => (k.until > now && (!k.shared || Atomics.load(k.shared, 0) > 0)) || (kept.delete(k), false);
  s.shards.onRestart((shard) => {
    const now = s.clock.now();
    for (const k of kept) {
      if (!live(k, now) || k.unanswered.has(shard)) continue;
      const fault = k.fault.durationMs === undefined ? k.fault : { ...k.fault, durationMs: k.until - now };
      s.shards.callShard(shard, 'sim.faults.set', { fault, ...(k.shared ? { shared: k.shared } : {}) }).then((r) => (k.ids[shard] = r.id)).catch((err: unknown) => s.log.warn('a simulator fault not set again in a restarted shard', { shard, err: errorMessage(err) }));
    }
  });
  return {
    async set(fault: SimFault, shared: Int32Array | undefined, setIn: (shard: number) => Promise<{ id: number }>): Promise<void> {
      const setAt = s.clock.now();
      const k: KeptFault = { fault, shared, setAt, until: fault.durationMs === undefined ? Infinity : setAt + fault.durationMs, unanswered: new Set(Array.from({ length: s.shards.size }, (_, i) => i)), ids: [] };
      kept.add(k);
      try {
        await Promise.all([...k.unanswered].map((i) => setIn(i).then((r) => (k.ids[i] = r.id)).finally(() => k.unanswered.delete(i))));
      } catch (err) {
        kept.delete(k); // refused (a bridge gateway has no simulator of its own)
        throw err;
      }
    },
    clear(server: string | undefined): void {
      for (const k of kept) if (server === undefined || k.fault.server === server) kept.delete(k);
    },
    /** An account's customer ended the faults on its login in the account's shard (`shard`; the one
     *  with `id` there, when given): the operator's among them end in the other shards too, and are
     *  not set again. Ended in one shard only, the others kept acting on the login (its next account
     *  on another shard, a restart's copy). */
    async endOfLogin(server: string, login: string, shard: number, id?: number): Promise<void> {
      const ended = [...kept].filter((k) => k.fault.server === server && k.fault.login === login && (id === undefined || k.ids[shard] === id));
      for (const k of ended) kept.delete(k);
      await Promise.all(ended.flatMap((k) => k.ids.map((other, i) => (i === shard || other === undefined ? undefined : s.shards.callShard(i, 'sim.faults.clear', { id: other })))));
    },
  };
}
