// A stand-in shard worker for ShardSet tests (plain JS: ShardSet runs a given workerFile as is).
// It answers every request with the size of the message (batch) that carried it; a request whose
// args say `seatId: 'hold'` is answered only when a later message carries one with 'release' (a
// call kept in flight for as long as a test needs, whatever the machine's load).
export default async function runShard(init) {
  const { port } = init;
  const held = [];
  return new Promise((resolve) => {
    port.on('message', (msg) => {
      if (msg.t === 'req') {
        const answer = (r) => ({ id: r.id, ok: true, result: { batch: msg.batch.length } });
        const now = msg.batch.filter((r) => r.args?.seatId !== 'hold').map(answer);
        held.push(...msg.batch.filter((r) => r.args?.seatId === 'hold').map(answer));
        if (msg.batch.some((r) => r.args?.seatId === 'release')) now.push(...held.splice(0));
        if (now.length > 0) port.postMessage({ t: 'rep', batch: now });
      } else if (msg.t === 'stop') {
        port.close();
        resolve({ stopped: true });
      }
    });
    port.postMessage({ t: 'ready', actors: 0 });
  });
}
