// A shard worker for test gateways started with `downableShards` (helpers/gateway.ts): this run's
// real worker until the test keeps the shard down (keepShardDown): from then on every start of it
// throws, as a shard that crashes while it rehydrates, and the supervisor starts it again and again
// (with its backoff), never ready. DATA_DIR/test-shards.json says which worker and which shards are
// down ({ worker, down: [shard, ...] }), read at every start.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export default async function runShard(init) {
  const { worker, down } = JSON.parse(readFileSync(join(init.dataDir, 'test-shards.json'), 'utf8'));
  if (down.includes(init.shard)) throw new Error(`shard ${init.shard} kept down by the test`);
  const real = await import(pathToFileURL(worker).href);
  return real.default(init);
}
