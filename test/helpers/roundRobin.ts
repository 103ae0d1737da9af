// A load balancer in front of a cluster's nodes, for clients that know one address (the SDK's
// reconnecting stream): each new TCP connection goes to the next port `ports()` gives (the nodes
// running now); a connection whose node refuses it is closed, and the client connects again. Bytes
// pass both ways untouched; a node's death ends its connections.
import { connect, createServer, type Socket } from 'node:net';

export interface RoundRobin {
  url: string;
  close(): Promise<void>;
}

export async function startRoundRobin(ports: () => number[]): Promise<RoundRobin> {
  let next = 0;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const live = ports();
    if (live.length === 0) {
      client.destroy();
      return;
    }
    const upstream = connect(live[next++ % live.length]!, '127.0.0.1');
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined); // the pair is closed below; a reset is how a node's death looks
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
