// A TCP proxy between a client and a gateway, for failure tests: it forwards until told to stall
// (connections stay open, nothing passes: what a dead NAT or a hung peer looks like), can point new
// connections at another port (a restarted gateway), and cut everything. A watcher sees every
// chunk before it passes and may drop it (a cut at an exact point of a protocol). Listens on port 0.
import { createServer, connect, type Server, type Socket } from 'node:net';

/** Sees a chunk from the client ('up') or the target ('down') of connection `conn` (numbered from
 *  1) before it passes; 'drop': it never does; `{ delayMs }`: it and whatever follows it that way
 *  pass that much later, in order (unless the connection closed meanwhile); `{ until }`: the same,
 *  once the promise settles (a test releases a held chunk when it has seen what it waits for);
 *  `{ replace }`: those bytes pass instead (a message cut out of a protocol's stream). */
export type ProxyWatcher = (dir: 'up' | 'down', chunk: Buffer, conn: number) => 'drop' | { delayMs: number } | { until: Promise<unknown> } | { replace: Buffer } | void;

/** For a watcher: whether all of `needles` passed one way of one connection, in the chunk given or
 *  the `keep` characters before it that way. TCP splits a stream anywhere: under load one NATS
 *  message (its subject in one chunk, its payload in the next) arrives in two reads, and a match
 *  made on each chunk alone never happens. */
export function streamMatcher(keep = 4_096): (dir: 'up' | 'down', conn: number, chunk: Buffer, needles: readonly string[]) => boolean {
  const tails = new Map<string, string>();
  return (dir, conn, chunk, needles) => {
    const key = `${dir}:${conn}`;
    const text = (tails.get(key) ?? '') + chunk.toString('latin1');
    tails.set(key, text.slice(-keep));
    return needles.every((n) => text.includes(n));
  };
}

export interface TcpProxy {
  url: string;
  port: number;
  /** New connections go to this port from now on (a function: to the port it gives for each one, a
   *  load balancer's choice). */
  target(port: number | (() => number)): void;
  /** Current connections stop passing bytes (both ways) but stay open; new ones work. */
  stall(): void;
  /** Current connections are reset; 'end': the client side is closed after what already passed
   *  (so a reply forwarded just before arrives whole), the target side at once. */
  cut(how?: 'reset' | 'end'): void;
  /** From now on every chunk goes through `w` (undefined: none). */
  watch(w: ProxyWatcher | undefined): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  let target: number | (() => number) = targetPort;
  let watcher: ProxyWatcher | undefined;
  let conns = 0;
  /** ending: cut with 'end', the client side closes by itself once what passed has arrived. */
  type Pair = { a: Socket; b: Socket; stalled: boolean; ending: boolean };
  const pairs = new Set<Pair>();
  /** Stalled connections: out of `pairs` (a later stall or cut leaves them be), closed with the proxy. */
  const stalled = new Set<Pair>();
  /** Cut with 'end': closed with the proxy if the client keeps them open. */
  const ending = new Set<Pair>();
  const server: Server = createServer((a) => {
    const b = connect(typeof target === 'function' ? target() : target, '127.0.0.1');
    const pair: Pair = { a, b, stalled: false, ending: false };
    const conn = ++conns;
    pairs.add(pair);
    // By hand rather than pipe(): the watcher sees (and may drop) each chunk before it is written.
    const forward = (from: Socket, to: Socket, dir: 'up' | 'down') => {
      let delayed: Buffer[] | undefined;
      from.on('data', (chunk: Buffer) => {
        if (delayed) return void delayed.push(chunk);
        const seen = pair.stalled || to.destroyed ? 'drop' : watcher?.(dir, chunk, conn);
        if (seen === 'drop') return;
        if (seen && 'replace' in seen) chunk = seen.replace;
        else if (seen) {
          const held = (delayed = [chunk]);
          const pass = () => {
            delayed = undefined;
            for (const c of held) if (!to.destroyed) to.write(c);
          };
          if ('until' in seen) void seen.until.then(pass, pass);
          else setTimeout(pass, seen.delayMs);
          return;
        }
        if (!to.write(chunk)) {
          from.pause();
          to.once('drain', () => pair.stalled || from.resume());
        }
      });
      from.on('end', () => to.end());
    };
    forward(a, b, 'up');
    forward(b, a, 'down');
    const end = () => {
      pairs.delete(pair);
      if (!pair.ending) a.destroy();
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
      for (const pair of pairs) {
        pair.stalled = true;
        pair.a.pause();
        pair.b.pause();
        stalled.add(pair);
      }
      pairs.clear();
    },
    cut: (how = 'reset') => {
      for (const pair of pairs) {
        pair.ending = how === 'end';
        if (pair.ending) {
          pair.a.end();
          ending.add(pair);
        } else pair.a.resetAndDestroy();
        pair.b.destroy();
      }
      pairs.clear();
    },
    watch: (w) => {
      watcher = w;
    },
    close: async () => {
      for (const { a, b } of [...pairs, ...stalled, ...ending]) {
        a.destroy();
        b.destroy();
      }
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
