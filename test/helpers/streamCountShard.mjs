// A stand-in shard worker for the ShardSet supervision tests (plain JS: ShardSet runs a given
// workerFile as is). Each thread counts stream.open minus stream.close per account, as the stream
// host does (src/runtime/hosts/streams.ts), and logs every request it received. `shard.ping`
// answers { opens, received } (this thread's). A message carrying `seat.get` with seatId 'die'
// kills the thread before it handles any request of that message. While DATA_DIR/down exists, every
// start throws (a shard that crashes while it rehydrates; the supervisor starts it again and again).
import { existsSync } from 'node:fs';
import { join } from 'node:path';

export default async function runShard(init) {
  if (existsSync(join(init.dataDir, 'down'))) throw new Error('kept down by the test');
  const { port } = init;
  const opens = {};
  const received = [];
  return new Promise((resolve, reject) => {
    port.on('message', (msg) => {
      if (msg.t === 'stop') {
        port.close();
        resolve({ stopped: true });
        return;
      }
      if (msg.t !== 'req') return;
      if (msg.batch.some((r) => r.op === 'seat.get' && r.args?.seatId === 'die')) {
        reject(new Error('killed by the test'));
        return;
      }
      const answers = msg.batch.map((r) => {
        received.push({ op: r.op, tag: r.args?.tag ?? r.args?.accountId ?? null });
        const id = r.args?.accountId;
        if (r.op === 'stream.open') opens[id] = (opens[id] ?? 0) + 1;
        if (r.op === 'stream.close') opens[id] = (opens[id] ?? 0) - 1;
        const result = r.op === 'shard.ping' ? { opens: { ...opens }, received: [...received] } : { ok: true };
        return { id: r.id, ok: true, result };
      });
      port.postMessage({ t: 'rep', batch: answers });
    });
    port.postMessage({ t: 'ready', actors: 0 });
  });
}
