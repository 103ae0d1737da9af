// What the dashboard's Overview and Seats pages show that no other route answers: the gateway's
// version, uptime, shard health and active configuration (operator only), and each account's
// connection phase with its recent history. Request rates, latencies and stream figures come from
// /metrics, read by the dashboard itself: one source for Prometheus and the dashboard alike.
import { z } from 'zod';
import { configSchema } from '../../config.js';
import type { ConnectionLog } from '../../runtime/connectionLog.js';
import { apiError } from '../../errors.js';
import { OPERATOR_PHASES } from '../../runtime/hosts/accountCommands.js';
import type { Services } from '../services.js';
import { AccountStore } from '../../store/accounts.js';
import { schemaVersionOf } from '../../store/migrations.js';
import { defineRoute, type AnyRoute } from '../route.js';
import { API_VERSION } from './ops.js';
import { clusterStatusBody, ClusterStatusBody } from '../clusterStatus.js';
import { PACKAGE_VERSION } from '../../version.js';
import { redactUrlCredentials } from '../../util/urlCredentials.js';
import { unsetMeanings } from '../../configUnset.js';
import { storedSimClock } from '../../store/simClock.js';


/** Configuration values that are secrets (keys, passwords, tokens): shown as set, never their value. */
const SECRET_NAME = /key$|secret|pass(word|phrase)|token|credential/i;

/** Engine addresses (DATABASE_URL, NATS_URL) may carry a user and password or a token: shown without them. */
const URL_NAME = /Url$/;

export function redactedConfig(config: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  // Every setting, unset optional ones as null (JSON would drop them), so the list is complete.
  for (const k of Object.keys(configSchema.shape)) {
    const v = config[k];
    out[k] = v === undefined ? null
      : SECRET_NAME.test(k) && typeof v === 'string' ? '[redacted]'
      : URL_NAME.test(k) && typeof v === 'string' ? redactUrlCredentials(v)
      : v;
  }
  return out;
}

const Phase = z.enum(OPERATOR_PHASES as [string, ...string[]]);
const PhaseChange = z.object({ at: z.string().describe('ISO 8601, UTC'), phase: Phase });
const LastError = PhaseChange.extend({
  reason: z.string().optional().describe("Why the account's last login attempt failed (the broker's or the bridge's message, at most 200 characters; never a password or key): for a failed attempt, which changes no phase (an account that never connected stays connecting), and for a refusal. Absent for a drop"),
}).describe('The latest drop, refusal or failed login attempt: when, the phase (for a failed attempt, the phase the account is in now) and why');

export function statusRoutes(s: Services, connections: ConnectionLog, startedAt: number): AnyRoute[] {
  const countPerShard = (ids: Iterable<string>): number[] => {
    const n = new Array<number>(s.shards.size).fill(0);
    for (const id of ids) n[s.shards.shardFor(id)]!++;
    return n;
  };
  // Every live seat is a scan of the seats (17-73 ms of this thread at 50,000 seats with their
  // shards, measured at load 7), and this thread answers the orders while the overview asks every
  // 2 s: counted again only once a seat came or went.
  let counted: { changes: number; perShard: number[] } | undefined;
  const liveSeatsPerShard = (): number[] => {
    const changes = s.tenancy.seatChanges;
    if (counted?.changes !== changes) counted = { changes, perShard: countPerShard(s.tenancy.liveSeatIds()) };
    return counted.perShard;
  };
  const bindings = AccountStore.of(s.db);
  // What this start decided (startupChecks.simClockOffset wrote it before the shards ran); bridge mode: the process's own.
  const sim = s.config.brokerMode === 'embedded' ? storedSimClock(s.db) : undefined;
  const simClockBody = (now: number) => sim ? { start: new Date(sim.startMs!).toISOString(), now: new Date(now + sim.offsetMs).toISOString() } : null;
  return [
    defineRoute({
      method: 'get', path: '/v1/status', family: 'provisioning', auth: 'management', tags: ['provisioning'],
      summary: "The gateway's version, uptime, shard health, accounts per connection phase and active configuration (secrets redacted); operator's management key only",
      response: z.object({
        version: z.string(), apiVersion: z.string(), node: z.string(), startedAt: z.string(), uptimeSec: z.number(),
        schemaVersion: z.number().int().describe("The database's schema version (user_version; tagw migrate --check)"),
        shards: z.array(z.object({ index: z.number(), ready: z.boolean(), restarts: z.number(), accounts: z.number() })),
        seats: z.number(), accounts: z.record(z.string(), z.number()),
        config: z.record(z.string(), z.unknown()),
        configUnset: z.record(z.string(), z.string()).describe('For each optional setting left unset (null in config), what applies instead: its default decided where it is used'),
        cluster: ClusterStatusBody,
        simClock: z.object({ start: z.string(), now: z.string() }).nullable()
          .describe("The embedded simulator's clock when it is not the wall clock (SIM_START, or the simulated clock DATA_DIR keeps): the instant it started at and its now, ISO 8601 UTC; null: the wall clock"),
      }),
      errors: ['MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY', 'FORBIDDEN'],
      handler: async ({ principal }) => {
        if (principal!.customerId !== s.operatorCustomerId) throw apiError('FORBIDDEN', "the gateway's status is for its operator's management key");
        const seats = s.tenancy.seatsOf(principal!.customerId);
        // The accounts each shard runs, every customer's: in cluster mode only those this node holds
        // (its SQLite mirrors every seat of the cluster; the others run on their owners). Counted
        // from the operator's own seats before, a shard running other customers' accounts showed 0.
        const perShard = s.cluster ? countPerShard(s.cluster.owned()) : liveSeatsPerShard();
        const now = s.clock.now();
        return {
          body: {
            version: PACKAGE_VERSION, apiVersion: API_VERSION, node: process.version, schemaVersion: schemaVersionOf(s.db),
            startedAt: new Date(startedAt).toISOString(), uptimeSec: Math.max(0, Math.round((now - startedAt) / 1000)),
            shards: s.shards.health().map((h) => ({ ...h, accounts: perShard[h.index] ?? 0 })),
            seats: seats.length, accounts: connections.counts(OPERATOR_PHASES),
            config: redactedConfig(s.config),
            configUnset: unsetMeanings(s.config),
            cluster: await clusterStatusBody(s.cluster, s.config.clusterLeaseMs),
            simClock: simClockBody(now),
          },
        };
      },
    }),
    defineRoute({
      method: 'get', path: '/v1/accounts/connections', family: 'provisioning', auth: 'management', tags: ['provisioning', 'accounts'],
      summary: "Each account's broker connection: phase, synced, recent phase changes and the last drop, refusal or failed login (why)",
      description: 'Phases as the shards reported them since this gateway started (connecting, connected, reconnecting, refused); a seat without a broker login has phase null. The broker login itself is never returned.',
      response: z.object({
        accounts: z.array(z.object({
          id: z.string(), platform: z.enum(['P4', 'P5']).nullable(), server: z.string().nullable(),
          phase: Phase.nullable(), synced: z.boolean(), since: z.string().nullable(),
          lastError: LastError.nullable(), history: z.array(PhaseChange),
          owner: z.string().nullable().optional().describe('Cluster mode: the node running the account now, whose phases these are (this node shows phase null for an account another node runs); null while none holds it (a takeover under way). Absent on a single node, for a seat without a broker login, or when PostgreSQL did not answer'),
        })),
      }),
      errors: ['MANAGEMENT_KEY_REQUIRED', 'INVALID_API_KEY'],
      handler: async ({ principal }) => {
        const iso = (at: number) => new Date(at).toISOString();
        const seats = s.tenancy.seatsOf(principal!.customerId);
        // Cluster mode: which node runs each (a list without it, PostgreSQL away, is still an answer).
        const owners = s.cluster ? await s.cluster.owners(seats.map((seat) => seat.id)).catch(() => undefined) : undefined;
        const accounts = seats.map((seat) => {
          const b = bindings.get(seat.id);
          const history = connections.history(seat.id);
          const last = history[history.length - 1];
          const err = connections.lastError(seat.id);
          return {
            id: seat.id, platform: b?.platform ?? null, server: b?.server ?? null,
            phase: b ? (last?.phase ?? null) : null, synced: b !== undefined && last?.phase === 'connected',
            since: last ? iso(last.at) : null, lastError: err ? { at: iso(err.at), phase: err.phase, ...(err.reason !== undefined ? { reason: err.reason } : {}) } : null,
            history: history.map((h) => ({ at: iso(h.at), phase: h.phase })),
            ...(owners?.has(seat.id) ? { owner: owners.get(seat.id)! } : {}),
          };
        });
        return { body: { accounts } };
      },
    }),
  ];
}
