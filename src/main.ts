// Composition root: config -> gateway; SIGTERM/SIGINT drain and exit.
import { ConfigError, loadConfig } from './config.js';
import { startGateway } from './gateway.js';
import { UwsFallbackError } from './http/uws.js';
import { createLogger } from './log.js';
import { DataDirInUseError } from './store/dataDirLock.js';
import { SchemaTooNewError } from './store/migrations.js';
import { NodeIdInUseError, SupersededError } from './cluster/nodeTwin.js';
import { StreamReplicasError } from './cluster/streamReplicasError.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);
  // Signal handlers first: a SIGTERM that arrives while the gateway is still starting must still
  // end in a clean shutdown (once it is up), not in Node's default kill.
  let stopping: string | undefined;
  let gw: Awaited<ReturnType<typeof startGateway>> | undefined;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = signal;
    log.info('shutting down', { signal });
    if (gw) void gw.close().then(() => process.exit(0));
  };
  // A promise rejection nobody handled is a missing catch, not a broken process: log it and keep
  // serving every other account (Node's default would end the process for all of them). Tests run
  // without this handler, so such a rejection still fails them.
  process.on('unhandledRejection', (reason) => log.error('unhandled promise rejection', { err: reason instanceof Error ? reason.message : String(reason) }));
  // `on`, not `once`: a second signal while draining must not fall through to Node's default (an
  // immediate kill that cuts the drain short). Ctrl-C under `npm start` sends two SIGINTs, the
  // terminal's and the one npm forwards. The drain is bounded by DRAIN_TIMEOUT_MS; kill -9 stops at once.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // SIGHUP: a renewed certificate (e.g. from certbot's deploy hook), without closing open sockets.
  process.on('SIGHUP', () => {
    if (!gw || stopping) return;
    void gw.reloadTls().catch((e: unknown) => log.error('TLS certificate not reloaded; the old one stays', { err: e instanceof Error ? e.message : String(e) }));
  });
  try {
    gw = await startGateway(config, { log });
  } catch (e) {
    if (e instanceof UwsFallbackError) {
      log.error(e.message);
      process.exit(3);
    }
    if (e instanceof DataDirInUseError) {
      log.error(e.message);
      process.exit(4);
    }
    if (e instanceof SchemaTooNewError) {
      log.error(e.message);
      process.exit(5);
    }
    if (e instanceof ConfigError || e instanceof NodeIdInUseError || e instanceof SupersededError || e instanceof StreamReplicasError) {
      log.error(e.message);
      process.exit(2);
    }
    throw e;
  }
  // A newer process took this node's NODE_ID over (this one was frozen): it holds nothing any more.
  if (gw.cluster) gw.cluster.onSuperseded = () => process.exit(2);
  if (stopping) await gw.close().then(() => process.exit(0));
}

void main().catch((e: unknown) => {
  // A system error (a file or directory the process cannot use) is the operator's to fix: one line
  // naming the path. Anything else is a bug: the stack helps.
  const sys = e as NodeJS.ErrnoException;
  const line = sys instanceof Error && typeof sys.code === 'string' && typeof sys.syscall === 'string'
    ? `cannot ${sys.syscall} ${sys.path ?? ''}: ${sys.code}`.replace('  ', ' ')
    : e instanceof Error ? (e.stack ?? e.message) : String(e);
  process.stderr.write(`fatal: ${line}\n`);
  process.exit(1);
});
