// Every series a gateway's /metrics has is named in the docs an operator reads (docs/operations.md's
// table, docs/cluster.md for cluster mode's, or another page it links): a series added without its
// line, or renamed with the docs left behind, fails here. Read from real gateways, one on a single node
// and one in cluster mode (real nats-server and PostgreSQL), not from the sources.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/build.js';
import { useClusterEngines } from '../helpers/cluster.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const docs = [join(ROOT, 'README.md'), ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(ROOT, 'docs', f))]
  .map((f) => readFileSync(f, 'utf8')).join('\n');

/** The gateway's own series (tagw_*) in a /metrics answer, by family (# TYPE lines). */
async function families(g: TestGateway): Promise<string[]> {
  const text = (await g.req('GET', '/metrics', { headers: mgmt(g.managementKey) })).text;
  return [...text.matchAll(/^# TYPE (tagw_\S+) /gm)].map((m) => m[1]!);
}

const undocumented = (names: string[]) => names.filter((n) => !new RegExp(`\`${n}(\\{[^}]*\\})?\``).test(docs));

describe('/metrics series are documented', () => {
  const engines = useClusterEngines();
  const gateways: TestGateway[] = [];
  beforeAll(async () => {
    gateways.push(await startTestGateway());
    gateways.push(await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl, nodeId: 'node-metrics',
    }));
  }, 60_000);
  afterAll(async () => {
    for (const g of gateways) await g.stop();
  });

  it('every tagw_* family of a single node and of a cluster node is named, in backticks, in the README or docs/', async () => {
    const single = await families(gateways[0]!);
    const cluster = await families(gateways[1]!);
    expect(single.length).toBeGreaterThan(20);
    expect(cluster.filter((n) => n.startsWith('tagw_cluster_')).length).toBeGreaterThan(5);
    expect(undocumented([...new Set([...single, ...cluster])])).toEqual([]);
  });

  it('the check fails on a name the docs do not have', () => {
    expect(undocumented(['tagw_no_such_series_total', 'tagw_http_inflight_requests'])).toEqual(['tagw_no_such_series_total']);
  });
});
