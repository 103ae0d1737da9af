// A TCP proxy between a client and a gateway, for failure tests: it forwards until told to stall
// (connections stay open, nothing passes: what a dead NAT or a hung peer looks like), can point new
// connections at another port (a restarted gateway), and cut everything. Listens on port 0.
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  url: string;
  port: number;
  /** New connections go to this port from now on. */
  target(port: number): void;
  /** Current connections stop passing bytes (both ways) but stay open; new ones work. */
  stall(): void;
  /** Current connections are reset. */
  cut(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target = targetPort;
  const pairs = new Set<{ a: Socket; b: Socket }>();
  /** Stalled connections: out of `pairs` (a later stall or cut leaves them be), closed with the proxy. */
  const stalled = new Set<{ a: Socket; b: Socket }>();
  const server: Server = createServer((a) => {
    const b = connect(target, '127.0.0.1');
    const pair = { a, b };
    pairs.add(pair);
    a.pipe(b);
    b.pipe(a);
    const end = () => {
      pairs.delete(pair);
      a.destroy();
      b.destroy();
    };
    a.on('error', end).on('close', end);
    b.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    target: (p) => {
      target = p;
    },
    stall: () => {
      for (const { a, b } of pairs) {
        a.unpipe(b);
        b.unpipe(a);
        a.pause();
        b.pause();
        stalled.add({ a, b });
      }
      pairs.clear();
    },
    cut: () => {
      for (const { a, b } of pairs) {
        a.resetAndDestroy();
        b.destroy();
      }
      pairs.clear();
    },
    close: async () => {
      for (const { a, b } of [...pairs, ...stalled]) {
        a.destroy();
        b.destroy();
      }
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
