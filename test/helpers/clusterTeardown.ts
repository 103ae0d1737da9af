// What a cluster test file started, stopped in order: the gateways first (each hands its accounts
// over and closes its own NATS and PostgreSQL connections), then the test's own clients, then the
// engines they used.
import type { NatsConnection } from '@nats-io/transport-node';
import type { PgPool } from '../../src/cluster/pgPool.js';
import type { TestGateway } from './gateway.js';

export async function stopClusterFile(o: {
  gateways: Iterable<TestGateway>; nc?: NatsConnection | undefined; pool?: PgPool | undefined;
  sim?: { close(): Promise<void> } | undefined; nats?: { stop(): Promise<void> } | undefined;
}): Promise<void> {
  for (const g of o.gateways) await g.stop().catch(() => undefined);
  await o.nc?.close();
  await o.pool?.end();
  await o.sim?.close();
  await o.nats?.stop();
}
