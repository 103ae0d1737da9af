// Standalone simulator speaking the bridge protocol over TCP:
//   npm run sim -- --port N [--host H] [--seed S] [--config file] [--data dir] [--market-hours sessions|always]
//                  [--start ISO-instant]
//                  [--tls-cert file --tls-key file]
// Each socket is one login: the first frame is `hello`, then requests and pushed events.
// Injected faults act on the wire: a drop closes the socket, "timeout after send" executes
// the trade and never sends its reply, latency delays replies, a mute sends no ticks or candles
// (the connection's own events, which the bridge forwards).
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { createSecureContext, createServer as createTlsServer } from 'node:tls';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { SimBrokerConnection } from './broker/sim.js';
import { BRIDGE_PROTOCOL_VERSION, encodeError, isFrameObject, LineReader, POSITIONS_DELTA, PositionsDeltaEncoder, type HelloArgs, type RequestFrame } from './broker/bridgeProtocol.js';
import type { BrokerEventName } from './broker/types.js';
import { BrokerRequestError, BrokerTimeoutError } from './market/brokerErrors.js';
import type { Timeframe } from './market/timeframes.js';
import { startCheckpointer } from './store/checkpointer.js';
import { loadReplayData, loadSimConfig, DEFAULT_CONFIG_PATH, MARKET_HOURS, type MarketHours } from './sim/config.js';
import { Simulator } from './sim/simulator.js';
import { SqliteSimStore } from './store/simStore.js';
import { SimClockError, simClockOf } from './store/simClock.js';
import { closedAt, parseSimStart } from './sim/simStart.js';
import { offsetClock } from './util/clock.js';
import { MemorySimStore } from './store/memorySimStore.js';
import { oneLine } from './startupChecks.js';

type Args = Record<string, unknown>;
const num = (a: Args, k: string) => a[k] as number;
const str = (a: Args, k: string) => a[k] as string;

/** Request dispatch: op name -> call on the login's connection. */
const OPS: Record<string, (c: SimBrokerConnection, a: Args) => Promise<unknown>> = {
  ping: async () => ({ pong: true }),
  accountSummary: (c) => c.accountSummary(),
  accountDetails: (c) => c.accountDetails(),
  serverTime: (c) => c.serverTime(),
  symbols: (c) => c.symbols(),
  symbol: (c, a) => c.symbol(str(a, 'name')),
  quote: (c, a) => c.quote(str(a, 'symbol')),
  requiredMargin: (c, a) => c.requiredMargin(str(a, 'symbol'), num(a, 'volume'), a.side as 'Buy' | 'Sell', a.price as number | undefined),
  orderSend: (c, a) => c.orderSend(a.req as never, a.opts as never),
  orderModify: (c, a) => c.orderModify(a.req as never, a.opts as never),
  orderClose: (c, a) => c.orderClose(a.req as never, a.opts as never),
  orderCloseBy: (c, a) => c.orderCloseBy(a.req as never, a.opts as never),
  orderDelete: (c, a) => c.orderDelete(a.req as never, a.opts as never),
  lookupRequest: (c, a) => c.lookupRequest(str(a, 'requestId')),
  openedOrders: (c) => c.openedOrders(),
  openedOrder: (c, a) => c.openedOrder(num(a, 'ticket')),
  historyDeals: (c, a) => c.historyDeals(num(a, 'fromMs'), num(a, 'toMs')),
  historyOrders: (c, a) => c.historyOrders(num(a, 'fromMs'), num(a, 'toMs')),
  balanceHistory: (c, a) => c.balanceHistory(num(a, 'fromMs'), num(a, 'toMs')),
  equityHistory: (c, a) => c.equityHistory(num(a, 'fromMs')),
  priceHistory: (c, a) => c.priceHistory(str(a, 'symbol'), a.timeframe as Timeframe, num(a, 'fromMs'), num(a, 'toMs')),
  quoteHistory: (c, a) => c.quoteHistory(str(a, 'symbol'), a.timeframe as Timeframe, num(a, 'fromMs'), num(a, 'count')),
  subscribe: (c, a) => c.subscribe(a.symbols as string[]),
  unsubscribe: (c, a) => c.unsubscribe(a.symbols as string[]),
  subscribeCandles: (c, a) => c.subscribeCandles(str(a, 'symbol'), a.timeframes as Timeframe[]),
  unsubscribeCandles: (c, a) => c.unsubscribeCandles(str(a, 'symbol'), a.timeframes as Timeframe[] | undefined),
};

/** The longest request line served (requests are small: a trade, a symbol list). */
const MAX_REQUEST_CHARS = 1 << 20;

const EVENTS: readonly BrokerEventName[] = ['tick', 'positions', 'orders', 'deal', 'candle'];

export interface SimServerHandle {
  readonly port: number;
  readonly server: Server;
  /** Destroy every open client socket (tests use it to break connections). */
  dropAll(): void;
  close(): Promise<void>;
}

export interface SimServerOptions {
  port?: number;
  host?: string;
  /** The simulator's clock runs this far from the wall clock (--start): told to each client in its
   *  hello (ServerInfo.clockOffsetMs), so a gateway's quote ages and default ranges follow it. */
  clockOffsetMs?: number;
  /** Serve TLS (gateways connect with BRIDGE_URL=tls://host:port): PEM certificate chain and key. */
  tls?: { cert: string | Buffer; key: string | Buffer };
}

export async function startSimServer(sim: Simulator, options: SimServerOptions = {}): Promise<SimServerHandle> {
  const sockets = new Set<Socket>();
  const onSocket = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serveSocket(sim, socket, options.clockOffsetMs ?? 0);
  };
  // TLS: a client that refuses the certificate never gets as far as a frame (the password is in its first).
  const server: Server = options.tls ? createTlsServer({ cert: options.tls.cert, key: options.tls.key }, onSocket) : createServer(onSocket);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    server,
    dropAll: () => {
      for (const s of sockets) s.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function serveSocket(sim: Simulator, socket: Socket, clockOffsetMs: number): void {
  socket.setNoDelay(true);
  socket.setEncoding('utf8');
  let conn: SimBrokerConnection | null = null;
  const offs: (() => void)[] = [];
  // A trade's frames (its deal, its positions, its reply) leave in one write: corked at the first,
  // uncorked once this turn's microtasks have run (nextTick), not on a timer. One syscall instead of three.
  let corked = false;
  const uncork = () => {
    corked = false;
    socket.uncork();
  };
  const send = (frame: unknown) => {
    if (socket.destroyed) return;
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    socket.write(JSON.stringify(frame) + '\n');
  };
  const teardown = () => {
    for (const off of offs.splice(0)) off();
    if (conn) void conn.disconnect();
    conn = null;
  };
  socket.on('close', teardown);
  socket.on('error', () => socket.destroy());

  // Not the protocol (not JSON, not a JSON object, a request line beyond any real request's
  // size): the socket is closed; nothing a peer sends may stop the simulator or stall it.
  const reader = new LineReader((line) => {
    let frame: unknown;
    try {
      frame = JSON.parse(line);
    } catch {
      socket.destroy();
      return;
    }
    if (!isFrameObject(frame)) {
      socket.destroy();
      return;
    }
    handle(frame as unknown as RequestFrame).catch(() => socket.destroy());
  }, MAX_REQUEST_CHARS, () => socket.destroy());
  socket.on('data', (chunk: string) => reader.push(chunk));

  // Set at the first hello, before its login is awaited: a second one (while the first is still
  // logging in, or after) would attach a second login's listeners to this socket.
  let helloSeen = false;
  async function handle(frame: RequestFrame): Promise<void> {
    const args = frame.args ?? {};
    if (frame.op === 'hello') {
      if (helloSeen) {
        send({ id: frame.id, error: { code: 'BROKER_PROTOCOL', message: 'already logged in: one login per connection' } });
        return;
      }
      const hello = args as unknown as HelloArgs;
      if (hello.version !== BRIDGE_PROTOCOL_VERSION) {
        send({ id: frame.id, error: { code: 'BROKER_PROTOCOL', message: `unsupported protocol version ${hello.version}` } });
        return;
      }
      helloSeen = true;
      try {
        const c = new SimBrokerConnection(sim, { server: hello.server, login: hello.login, password: hello.password });
        await c.connect();
        conn = c;
        const delta = Array.isArray(hello.features) && hello.features.includes(POSITIONS_DELTA) ? new PositionsDeltaEncoder() : null;
        for (const e of EVENTS) {
          offs.push(e === 'positions' && delta
            ? c.on('positions', (list) => send({ event: POSITIONS_DELTA, data: delta.encode(list) }))
            : c.on(e, (data) => send({ event: e, data })));
        }
        // An injected drop closes the wire, as a real outage would.
        offs.push(c.on('state', (s) => s.state === 'disconnected' && socket.destroy()));
        const server = clockOffsetMs ? { ...c.server, clockOffsetMs } : c.server;
        send({ id: frame.id, result: { version: BRIDGE_PROTOCOL_VERSION, server, ...(delta ? { features: [POSITIONS_DELTA] } : {}) } });
      } catch (err) {
        send({ id: frame.id, error: encodeError(err) });
        socket.end();
      }
      return;
    }
    const op = OPS[frame.op];
    if (!conn) {
      send({ id: frame.id, error: { code: 'BROKER_PROTOCOL', message: 'hello first' } });
      return;
    }
    if (!op) {
      send({ id: frame.id, error: encodeError(new BrokerRequestError('INVALID_REQUEST', `unknown op ${frame.op}`)) });
      return;
    }
    try {
      const result = await op(conn, args);
      send({ id: frame.id, result: result ?? null });
    } catch (err) {
      // "Timeout after send": the trade executed, the reply is lost on the wire.
      if (err instanceof BrokerTimeoutError) return;
      send({ id: frame.id, error: encodeError(err) });
    }
  }
}

const OPTIONS = ['port', 'seed', 'config', 'data', 'host', 'market-hours', 'start', 'tls-cert', 'tls-key'];

/**
 * `--name value` or `--name=value`. Anything else is refused: an ignored typo (`--dta dir`,
 * `--port=4510`) would run with state in memory, or on a random port, without a word.
 */
function parseArgv(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const m = /^--([^=]+)(?:=(.*))?$/s.exec(a);
    if (!m || !OPTIONS.includes(m[1]!)) {
      throw new UsageError(`${m ? 'unknown option' : 'unexpected argument'} ${a} (options: ${OPTIONS.map((o) => `--${o}`).join(', ')})`);
    }
    out[m[1]!] = m[2] ?? argv[++i] ?? '';
  }
  return out;
}

/** A mistake in the command line or its files: one line and exit 2, not a stack trace. */
class UsageError extends Error {}

function attempt<T>(what: string, f: () => T): T {
  try {
    return f();
  } catch (err) {
    throw new UsageError(`${what}: ${oneLine(err)}`);
  }
}

async function main(): Promise<void> {
  const args = parseArgv(process.argv.slice(2));
  const port = Number(args.port ?? 0);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port ${args.port}: expected a port number 0-65535`);
  if (args.seed !== undefined && !Number.isInteger(Number(args.seed))) throw new UsageError(`--seed ${args.seed}: expected an integer`);
  const hours = args['market-hours'];
  if (hours !== undefined && !(MARKET_HOURS as readonly string[]).includes(hours)) {
    throw new UsageError(`--market-hours ${hours}: expected ${MARKET_HOURS.join(' or ')}`);
  }
  const start = args.start === undefined ? undefined : parseSimStart(args.start);
  if (start && 'problem' in start) throw new UsageError(`--start: ${start.problem}`);
  const startMs = start?.ms;
  const configPath = args.config || DEFAULT_CONFIG_PATH;
  const config = attempt(`--config ${configPath}`, () => loadSimConfig(configPath, {
    ...(args.seed ? { seed: Number(args.seed) } : {}), ...(hours ? { marketHours: hours as MarketHours } : {}),
  }));
  const replay = attempt(`replay data of ${configPath}`, () => loadReplayData(config, dirname(configPath)));
  let store;
  // --start: the market's clock is the wall clock plus an offset, kept with --data (src/store/simClock.ts).
  let offsetMs = startMs === undefined ? 0 : startMs - Date.now();
  let simStartMs = startMs;
  if (args.data) {
    let opened: Database.Database | undefined;
    const file = join(args.data, 'sim.db');
    store = attempt(`--data ${args.data}`, () => {
      mkdirSync(args.data!, { recursive: true });
      const db = new Database(file);
      SqliteSimStore.configure(db);
      opened = db;
      // Fail-stop: after a failed commit the memory is ahead of the disk (simFailStop.ts); the process
      // ends so that its restart starts from what is durable.
      return new SqliteSimStore(db, {
        onError: (err) => {
          console.error(`simulator store: a commit failed (${oneLine(err)}); exiting to restart from what is on disk`);
          process.exit(1);
        },
      });
    });
    try {
      const clock = simClockOf(opened!, startMs, Date.now(), `--data ${args.data}`);
      if (clock.kept) console.error(`simulator: no --start: the simulated clock --data ${args.data} keeps (started at ${new Date(clock.startMs!).toISOString()}) goes on`);
      offsetMs = clock.offsetMs;
      simStartMs = clock.startMs;
    } catch (err) {
      throw err instanceof SimClockError ? new UsageError(`--start: ${err.message}`) : err;
    }
    startCheckpointer(file, { onError: (err) => console.error('WAL checkpointer stopped', err) });
  } else {
    store = new MemorySimStore();
  }
  const sim = new Simulator({ config, store, replay, clock: offsetClock(offsetMs), ...(simStartMs !== undefined ? { replayStartMs: simStartMs } : {}) });
  const closed = simStartMs === undefined ? [] : closedAt(config, Date.now() + offsetMs);
  if (closed.length) console.error(`simulator: the simulated clock is where ${closed.join(', ')} do not quote or trade (a --start on a weekend opens into a closed forex market): they start at their next session, or use --market-hours always`);
  sim.start(20);
  const host = args.host || '127.0.0.1';
  if (!args['tls-cert'] !== !args['tls-key']) throw new UsageError('--tls-cert and --tls-key go together');
  const tls = args['tls-cert'] ? attempt(`--tls-cert ${args['tls-cert']} / --tls-key ${args['tls-key']}`, () => {
    const files = { cert: readFileSync(args['tls-cert']!), key: readFileSync(args['tls-key']!) };
    createSecureContext(files); // a key that does not match the certificate: refused here, not at the first client
    return files;
  }) : undefined;
  const handle = await startSimServer(sim, { port, host, clockOffsetMs: offsetMs, ...(tls ? { tls } : {}) }).catch((err: unknown) => {
    throw new UsageError(`cannot listen on ${host}:${port}: ${oneLine(err)}`);
  });
  console.log(JSON.stringify({ listening: handle.port, servers: config.servers.map((s) => s.name), seed: config.seed, marketHours: hours ?? 'sessions',
    ...(simStartMs !== undefined ? { simStart: new Date(simStartMs).toISOString(), simNow: new Date(Date.now() + offsetMs).toISOString() } : {}) }));
  const stop = () => {
    sim.stop();
    void handle.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`simulator: ${err instanceof UsageError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  });
}
