// Cluster mode's settings as an operator meets them: the process refuses half a cluster and the
// embedded simulator in one, in one line with exit code 2, and an engine it cannot reach in one
// line with exit code 1 (docs/cluster.md).
import { hostname } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterSettings, ConfigError, loadConfig } from '../../src/config.js';
import { createDatabase, freePort, startNats } from '../helpers/engines.js';
import { sharedPostgres } from '../helpers/postgres.js';
import { cleanupProcesses, startProcess } from '../helpers/process.js';

afterEach(cleanupProcesses);

const NATS = 'nats://127.0.0.1:4222';
const PG = 'postgres://tagw:pw@127.0.0.1:5432/tagw';
const BRIDGE = { BROKER_MODE: 'bridge', BRIDGE_URL: 'tcp://127.0.0.1:4510' };

describe('cluster settings', () => {
  it('single node unless both engines are named; node id defaults to host and port; lease and wait defaults', () => {
    expect(clusterSettings(loadConfig({}))).toBeUndefined();
    expect(clusterSettings(loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, PORT: '8123', ...BRIDGE }))).toEqual({
      natsUrl: NATS, databaseUrl: PG, nodeId: `${hostname()}:8123`, leaseMs: 10_000, ownerWaitMs: 5_000, aliveAskMs: 250, stepDownMs: 10_000, streamReplicas: 1,
    });
    expect(clusterSettings(loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, NODE_ID: 'node-a', CLUSTER_LEASE_MS: '3000', CLUSTER_OWNER_WAIT_MS: '700', CLUSTER_ALIVE_ASK_MS: '90', ...BRIDGE })))
      .toMatchObject({ nodeId: 'node-a', leaseMs: 3000, ownerWaitMs: 700, aliveAskMs: 90, stepDownMs: 3000 });
    expect(clusterSettings(loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, CLUSTER_STEP_DOWN_MS: '2500', ...BRIDGE }))).toMatchObject({ leaseMs: 10_000, stepDownMs: 2500 });
    // The cold-start settle period: unset, the lease keeper's default (a third of the lease); 0 is allowed.
    expect(clusterSettings(loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, CLUSTER_SETTLE_MS: '0', ...BRIDGE }))).toMatchObject({ settleMs: 0 });
    expect(clusterSettings(loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, CLUSTER_SETTLE_MS: '1500', ...BRIDGE }))).toMatchObject({ settleMs: 1500 });
    // The history stream's replicas in JetStream (a 3-server NATS cluster: 3).
    expect(clusterSettings(loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, NATS_STREAM_REPLICAS: '3', ...BRIDGE }))).toMatchObject({ streamReplicas: 3 });
  });

  it('names the mistake: half a cluster, embedded simulator, a bad address or node id', () => {
    expect(() => loadConfig({ NATS_URL: NATS, ...BRIDGE })).toThrow(/databaseUrl: NATS_URL and DATABASE_URL go together/);
    expect(() => loadConfig({ DATABASE_URL: PG, ...BRIDGE })).toThrow(/natsUrl: NATS_URL and DATABASE_URL go together/);
    expect(() => loadConfig({ NATS_URL: NATS, DATABASE_URL: PG })).toThrow(/brokerMode: cluster mode .*npm run sim/);
    expect(() => loadConfig({ NATS_URL: 'localhost:4222', DATABASE_URL: PG, ...BRIDGE })).toThrow(ConfigError);
    expect(() => loadConfig({ NATS_URL: NATS, DATABASE_URL: 'mysql://x', ...BRIDGE })).toThrow(/databaseUrl: expected postgres:/);
    expect(() => loadConfig({ NATS_URL: NATS, DATABASE_URL: PG, NODE_ID: 'a b', ...BRIDGE })).toThrow(/nodeId/);
    // An address its client cannot parse (a port that is no number) is a mistake in the value (exit 2),
    // not an engine away (exit 1, which a supervisor answers by restarting): named, never echoed.
    expect(() => loadConfig({ NATS_URL: NATS, DATABASE_URL: 'postgres://tagw:pw@127.0.0.1:notaport/tagw', ...BRIDGE })).toThrow(/databaseUrl: not a valid URL/);
    expect(() => loadConfig({ NATS_URL: 'nats://u:pw@127.0.0.1:4222,nats://127.0.0.1:notaport', DATABASE_URL: PG, ...BRIDGE })).toThrow(/natsUrl: not a valid URL/);
    expect(() => loadConfig({ NATS_URL: NATS, DATABASE_URL: 'postgres://tagw:pw@127.0.0.1:notaport/tagw', ...BRIDGE })).not.toThrow(/:pw@/);
    // What the clients do take stays accepted: an unencoded @ in the password, a socket host, IPv6, several servers.
    for (const DATABASE_URL of ['postgres://tagw:p@w@127.0.0.1:5432/tagw', 'postgres://tagw@/tagw?host=/var/run/postgresql', 'postgres://tagw@%2Fvar%2Frun%2Fpostgresql/tagw', 'postgresql://tagw:pw@[::1]:5432/tagw']) {
      expect(() => loadConfig({ NATS_URL: 'nats://a:4222,tls://token@b:4222', DATABASE_URL, ...BRIDGE }), DATABASE_URL).not.toThrow();
    }
    expect(() => loadConfig({ CLUSTER_LEASE_MS: '10' })).toThrow(/clusterLeaseMs/);
    expect(() => loadConfig({ CLUSTER_STEP_DOWN_MS: '50' })).toThrow(/clusterStepDownMs/);
    expect(() => loadConfig({ CLUSTER_SETTLE_MS: '-1' })).toThrow(/clusterSettleMs/);
    for (const bad of ['0', '6', '2.5', 'three']) expect(() => loadConfig({ NATS_STREAM_REPLICAS: bad })).toThrow(/natsStreamReplicas/);
  });

  it('the process exits 2 with one line, never echoing the database password', async () => {
    for (const [env, message] of [
      [{ NATS_URL: NATS }, /NATS_URL and DATABASE_URL go together/],
      [{ DATABASE_URL: PG }, /NATS_URL and DATABASE_URL go together/],
      [{ NATS_URL: NATS, DATABASE_URL: PG }, /cannot use the embedded simulator: use bridge mode, BROKER_MODE=bridge BRIDGE_URL=.*npm run sim/],
      [{ NATS_URL: NATS, DATABASE_URL: PG, ...BRIDGE, NATS_STREAM_REPLICAS: '6' }, /natsStreamReplicas: .*5/],
    ] as Array<[Record<string, string>, RegExp]>) {
      const p = startProcess(env);
      expect(await p.exited, JSON.stringify(env)).toBe(2);
      expect(p.output()).toMatch(message);
      expect(p.output().trim().split('\n')).toHaveLength(1);
      expect(p.output()).not.toContain(':pw@');
    }
  }, 60_000);

  it('NATS unreachable at start: exit 1 with one line naming the server, never its password, and nothing else', async () => {
    const natsPort = await freePort();
    const p = startProcess({
      NATS_URL: `nats://tagw:natsS3cret@127.0.0.1:${natsPort}`, DATABASE_URL: await createDatabase((await sharedPostgres()).url),
      BROKER_MODE: 'bridge', BRIDGE_URL: 'tls://127.0.0.1:4510', LOG_LEVEL: 'warn',
    });
    expect(await p.exited).toBe(1);
    // Not a stack trace, and no warning from closing the PostgreSQL side twice.
    expect(p.output().trim().split('\n')).toEqual([`fatal: cannot connect NATS 127.0.0.1:${natsPort}: ECONNREFUSED`]);
  }, 60_000);

  it('more history replicas than the NATS servers hold: exit 2 with one line naming NATS_STREAM_REPLICAS', async () => {
    const nats = await startNats();
    try {
      const p = startProcess({
        NATS_URL: nats.url, DATABASE_URL: await createDatabase((await sharedPostgres()).url), NODE_ID: 'lone',
        BROKER_MODE: 'bridge', BRIDGE_URL: 'tcp://127.0.0.1:4510', LOG_LEVEL: 'error', NATS_STREAM_REPLICAS: '3',
      });
      expect(await p.exited).toBe(2);
      const lines = p.output().trim().split('\n');
      expect(lines, p.output()).toHaveLength(1);
      expect(lines[0]).toMatch(/NATS_STREAM_REPLICAS=3: .*not in a cluster.*1 on a single nats-server/);
    } finally {
      await nats.stop();
    }
  }, 60_000);
});
