// A bare uWS server in a process of its own, answering GET /bare with a fixed small JSON: the
// control of bench/ramp.ts. It does none of the gateway's work, so what a ramp adds to its
// latency is the machine's (the run queue of the shared CPUs, the client's own wake-ups), not the
// gateway's. Sends its port to the parent by IPC once it listens.
import uws from 'uWebSockets.js';

if (process.send) {
  const body = JSON.stringify({ bid: 1.2345, ask: 1.2347, time: 0 });
  const app = uws.App().get('/bare', (res) => {
    res.cork(() => res.writeHeader('content-type', 'application/json').end(body));
  });
  app.listen('127.0.0.1', 0, (s) => {
    process.send!({ port: uws.us_socket_local_port(s as never) });
  });
  process.on('disconnect', () => process.exit(0));
}
