// Lifecycle of one broker connection of an account (SPEC §3 "Connection state"):
//   connecting → connected → reconnecting → connected ..., plus draining → closing → stopped for a
// rolling upgrade, and authFailed when the broker refuses the credentials.
//
// Pure: the side effects (the BrokerConnection calls and phase notices) go through the
// `ConnectionPort` the host passes in the input, one per instance, so one machine definition serves
// every account (a `provide()` per account built its own state nodes: ~10 KiB each, a third of an
// idle account's memory). Tests may still swap the implementations with `provide()`. Reconnect waits are states with an `after` transition on the named delay
// `backoff` (capped exponential with jitter), so there is no timer handle to clear by hand, and
// CheckConnect (`check`) cuts a wait short. Every invoke has onError.
//
// One machine instance owns exactly one BrokerConnection. A rolling upgrade never overlaps two
// live connections: the host sends `drain`, waits for the in-flight requests of this connection,
// sends `drained`, and starts the replacement only when this machine reached `stopped`.
import { assign, fromPromise, setup } from 'xstate';

export type ConnectionPhase = 'connecting' | 'connected' | 'reconnecting';

/** What one instance acts on: its BrokerConnection and whoever listens to its phases. */
export interface ConnectionPort {
  /** BrokerConnection.connect(); rejects with code BROKER_AUTH on bad credentials. */
  connect(signal: AbortSignal): Promise<void>;
  disconnect(): Promise<void>;
  notify(phase: ConnectionPhase | 'authFailed' | 'stopped'): void;
}

export interface ConnectionInput {
  accountId: string;
  port?: ConnectionPort;
  /** First reconnect wait (ms) before jitter. */
  backoffBaseMs?: number;
  /** Longest reconnect wait (ms). */
  backoffCapMs?: number;
}

export interface ConnectionContext {
  accountId: string;
  port: ConnectionPort | null;
  backoffBaseMs: number;
  backoffCapMs: number;
  /** Failed attempts since the last successful connect. */
  attempt: number;
  everConnected: boolean;
  lastError: string | null;
}

export type ConnectionEvent =
  | { type: 'broker.dropped'; reason?: string }
  | { type: 'check' }
  | { type: 'drain' }
  | { type: 'drained' };

/** Capped exponential backoff with "equal jitter": a wait in [d/2, d], d = min(cap, base·2^attempt). */
export function backoffMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const d = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(d / 2 + random() * (d / 2));
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));
/** The broker answered the login with a refusal (wrong password, a server it does not know): a
 *  retry gets the same answer, unlike a transport failure. */
const isRefusal = (e: unknown) => {
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  return code === 'BROKER_AUTH' || code === 'BROKER_REQUEST';
};

/** One try to connect: on a refusal authFailed, on another failure the backoff wait (`waiting`).
 *  Connecting starts with it, reconnecting with the wait; both share the two states. */
const attempt = {
  invoke: {
    src: 'connect',
    input: ({ context }: { context: ConnectionContext }) => ({ accountId: context.accountId, attempt: context.attempt, port: context.port }),
    onDone: { target: '#connection.connected' },
    onError: [
      { guard: 'isAuthError', target: '#connection.authFailed', actions: 'recordFailure' },
      { target: 'waiting', actions: 'recordFailure' },
    ],
  },
} as const;
/** The backoff before the next attempt; CheckConnect (`check`) cuts it short. */
const waiting = { after: { backoff: 'attempt' }, on: { check: 'attempt' } } as const;

export const connectionMachine = setup({
  types: {
    input: {} as ConnectionInput,
    context: {} as ConnectionContext,
    events: {} as ConnectionEvent,
  },
  actors: {
    /** BrokerConnection.connect(). Rejects with code BROKER_AUTH on bad credentials. */
    connect: fromPromise<void, { accountId: string; attempt: number; port: ConnectionPort | null }>(async ({ input, signal }) => {
      if (!input.port) throw new Error('connect not provided');
      await input.port.connect(signal);
    }),
    /** BrokerConnection.disconnect(). */
    disconnect: fromPromise<void, { accountId: string; port: ConnectionPort | null }>(async ({ input }) => {
      await input.port?.disconnect();
    }),
  },
  actions: {
    /** Tells registry listeners (HEARTBEAT, /AccountSummary synced). */
    notify: ({ context }, params: { phase: ConnectionPhase | 'authFailed' | 'stopped' }) => context.port?.notify(params.phase),
    recordFailure: assign({
      attempt: ({ context }) => context.attempt + 1,
      lastError: ({ event }) => errorText((event as { error?: unknown }).error),
    }),
    recordConnected: assign({ attempt: 0, everConnected: true, lastError: null }),
    recordDrop: assign({ lastError: ({ event }) => (event.type === 'broker.dropped' ? (event.reason ?? 'connection dropped') : null) }),
  },
  guards: {
    isAuthError: ({ event }) => isRefusal((event as { error?: unknown }).error),
  },
  delays: {
    backoff: ({ context }) => backoffMs(context.attempt, context.backoffBaseMs, context.backoffCapMs),
  },
}).createMachine({
  id: 'connection',
  context: ({ input }) => ({
    accountId: input.accountId,
    port: input.port ?? null,
    backoffBaseMs: input.backoffBaseMs ?? 250,
    backoffCapMs: input.backoffCapMs ?? 30_000,
    attempt: 0,
    everConnected: false,
    lastError: null,
  }),
  initial: 'connecting',
  states: {
    connecting: {
      entry: { type: 'notify', params: { phase: 'connecting' } },
      initial: 'attempt',
      on: { drain: 'draining' },
      states: {
        attempt,
        waiting,
      },
    },
    connected: {
      entry: ['recordConnected', { type: 'notify', params: { phase: 'connected' } }],
      on: {
        'broker.dropped': { target: 'reconnecting', actions: 'recordDrop' },
        drain: 'draining',
      },
    },
    reconnecting: {
      entry: { type: 'notify', params: { phase: 'reconnecting' } },
      initial: 'waiting',
      on: { drain: 'draining' },
      states: {
        waiting,
        attempt,
      },
    },
    /** The broker refused the login (credentials, or a server it does not know): no automatic retry
     *  (it would lock the login, or ask in vain forever); CheckConnect or a new binding retries. */
    authFailed: {
      entry: { type: 'notify', params: { phase: 'authFailed' } },
      on: { check: 'connecting', drain: 'draining' },
    },
    /** Rolling upgrade: in-flight requests of this connection finish; new ones wait for the replacement. */
    draining: {
      on: { drained: 'closing' },
    },
    closing: {
      invoke: {
        src: 'disconnect',
        input: ({ context }) => ({ accountId: context.accountId, port: context.port }),
        onDone: 'stopped',
        onError: 'stopped',
      },
    },
    stopped: {
      type: 'final',
      entry: { type: 'notify', params: { phase: 'stopped' } },
    },
  },
});

/** The SPEC §3 phase a machine state reports (HEARTBEAT `connection`, /AccountSummary `synced`). */
export function phaseOf(value: unknown, everConnected: boolean): ConnectionPhase {
  const top = typeof value === 'string' ? value : Object.keys(value as object)[0];
  switch (top) {
    case 'connected':
    case 'draining':
      return 'connected';
    case 'connecting':
      return 'connecting';
    default:
      return everConnected ? 'reconnecting' : 'connecting';
  }
}
