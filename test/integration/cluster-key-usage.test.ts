// A cluster node writes its keys' last use to PostgreSQL every KEY_USAGE_FLUSH_MS and once more when
// it stops: that last write happens before the node's PostgreSQL pool closes (it used to come after,
// and was lost with a warning "could not record keys' last use: Cannot use a pool after calling end").
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { useClusterEngines } from '../helpers/cluster.js';
import { startTestGateway, TEST_MANAGEMENT_KEY } from '../helpers/gateway.js';

const engines = useClusterEngines();

describe('keys\' last use in cluster mode', () => {
  it('a key used since the last flush has its last use in PostgreSQL after the node stops, with no warning', async () => {
    const lines: string[] = [];
    const gw = await startTestGateway({
      brokerMode: 'bridge', bridgeUrl: engines.sim.url, shards: 1, natsUrl: engines.nats.url, databaseUrl: engines.databaseUrl,
      nodeId: 'usage-a', keyUsageFlushMs: 3_600_000, // no periodic flush: only the one at close
    }, { log: createLogger('warn', {}, (l) => lines.push(l)) });
    let stopped = false;
    try {
      const made = await gw.req('POST', '/v1/keys', { headers: { authorization: `Bearer ${TEST_MANAGEMENT_KEY}` }, body: { label: 'usage' } });
      expect(made.status).toBe(201);
      const { id, key } = made.body as { id: string; key: string };
      const before = Date.now();
      expect((await gw.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } })).status).toBe(200);
      await gw.stop();
      stopped = true;
      const row = await engines.pool.query<{ last_used_at: string | null }>('SELECT last_used_at FROM keys WHERE id = $1', [id]);
      expect(Number(row.rows[0]?.last_used_at)).toBeGreaterThanOrEqual(before);
      expect(lines.filter((l) => l.includes('last use'))).toEqual([]);
    } finally {
      if (!stopped) await gw.stop();
    }
  }, 60_000);
});
