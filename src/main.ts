// Composition root: config -> gateway; SIGTERM/SIGINT drain and exit.
import { ConfigError, loadConfig } from './config.js';
import { startGateway } from './gateway.js';
import { UwsFallbackError } from './http/uws.js';
import { createLogger } from './log.js';

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
  let gw;
  try {
    gw = await startGateway(config, { log });
  } catch (e) {
    if (e instanceof UwsFallbackError) {
      log.error(e.message);
      process.exit(3);
    }
    throw e;
  }
  const stop = (signal: string) => {
    log.info('shutting down', { signal });
    void gw.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
}

void main().catch((e: unknown) => {
  process.stderr.write(`fatal: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
