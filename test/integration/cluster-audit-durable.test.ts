// Audit rows in cluster mode survive the node's death (docs/cluster.md, failures): an audited action
// is answered only once its row is in PostgreSQL, or on the node's disk while PostgreSQL is away,
// and a row left on disk is written by the node's next start. A gateway process in cluster mode
// (SIGKILL is real), a simulator process, real nats-server and PostgreSQL, the node reaching
// PostgreSQL through a TCP proxy the test delays or cuts. Before, the row waited in the node's
// memory (and the answer did not wait for it): a kill right after the answer lost it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPgPool, type PgPool } from '../../src/cluster/pgPool.js';
import { CLUSTER_MANAGEMENT_KEY, ClusterProcs, startEngines, type Engines } from '../helpers/clusterProcs.js';
import { freePort } from '../helpers/engines.js';
import { cleanupProcesses } from '../helpers/process.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { until } from '../helpers/until.js';

let engines: Engines;
let proxy: TcpProxy;
let cluster: ClusterProcs;
let id: string;
let db: PgPool;
const AUDIT_INSERT = 'INSERT INTO audit_log';

beforeAll(async () => {
  engines = await startEngines();
  proxy = await startTcpProxy(engines.pg.port);
  cluster = await ClusterProcs.start(engines, { nodes: 1, pgPort: proxy.port });
  id = cluster.nodes[0]!.id;
  db = openPgPool(cluster.databaseUrl, { max: 1 });
}, 120_000);
afterAll(async () => {
  await db?.end();
  await cluster?.close();
  cleanupProcesses();
  await proxy?.close();
  await engines?.stop();
}, 60_000);

async function createKey(label: string): Promise<string> {
  const r = await fetch(`${cluster.node(id).url}/v1/keys`, {
    method: 'POST', headers: { authorization: `Bearer ${CLUSTER_MANAGEMENT_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ label }),
  });
  const body = await r.json() as { id: string };
  expect(r.status).toBe(201);
  return body.id;
}

/** The key.create rows PostgreSQL holds for the key (read past the proxy). */
async function audited(keyId: string): Promise<number> {
  const r = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE action = 'key.create' AND target = $1", [keyId]);
  return r.rows[0]!.n;
}

describe('audit rows of a cluster node that is killed', () => {
  it('an audited action answered is in PostgreSQL although the node is SIGKILLed right after the answer (its row\'s INSERT delayed 1 s on the way)', async () => {
    proxy.watch((dir, chunk) => (dir === 'up' && chunk.includes(AUDIT_INSERT) ? { delayMs: 1_000 } : undefined));
    try {
      const keyId = await createKey('killed-after-answer');
      await cluster.kill(id);
      expect(await audited(keyId)).toBe(1);
    } finally {
      proxy.watch(undefined);
    }
  }, 60_000);

  it('a row kept while PostgreSQL was unreachable is on the node\'s disk: SIGKILLed, then started again, the node writes it, once', async () => {
    if (cluster.node(id).state === 'down') await cluster.launch(id);
    const dead = await freePort();
    let cut = false;
    // PostgreSQL goes away exactly as the audit row is written (the key itself committed before).
    proxy.watch((dir, chunk) => {
      if (cut || dir !== 'up' || !chunk.includes(AUDIT_INSERT)) return undefined;
      cut = true;
      proxy.target(dead);
      proxy.cut('reset');
      return 'drop';
    });
    let keyId: string;
    try {
      keyId = await createKey('kept-on-disk');
      await until(() => cut, 'the audit row\'s INSERT to be cut', 10_000);
      await cluster.kill(id);
    } finally {
      proxy.watch(undefined);
      proxy.target(engines.pg.port);
    }
    expect(await audited(keyId)).toBe(0);
    await cluster.launch(id);
    await until(async () => (await audited(keyId)) > 0, 'the kept audit row to reach PostgreSQL after the restart', 20_000);
    expect(await audited(keyId)).toBe(1);
  }, 90_000);
});
