// A stand-in shard worker for ShardSet tests (plain JS: ShardSet runs a given workerFile as is).
// It answers every request with the size of the message (batch) that carried it.
export default async function runShard(init) {
  const { port } = init;
  return new Promise((resolve) => {
    port.on('message', (msg) => {
      if (msg.t === 'req') {
        port.postMessage({ t: 'rep', batch: msg.batch.map((r) => ({ id: r.id, ok: true, result: { batch: msg.batch.length } })) });
      } else if (msg.t === 'stop') {
        port.close();
        resolve({ stopped: true });
      }
    });
    port.postMessage({ t: 'ready', actors: 0 });
  });
}
