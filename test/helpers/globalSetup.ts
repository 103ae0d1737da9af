// Started once for the whole test run, in vitest's main process (vitest.config.ts globalSetup): one
// PostgreSQL that the test files share, each in databases of its own (createDatabase), so a file
// pays for a CREATE DATABASE instead of an initdb and a server start (~1 s quiet, ~5 s with four
// files at once). A file that kills or restarts PostgreSQL starts its own (startPostgres). NATS
// stays per file: its subjects, stream and bucket names are fixed (src/cluster/subjects.ts), so two
// files' clusters on one nats-server would hear each other.
import type { TestProject } from 'vitest/node';
import { startPostgres } from './engines.js';
// ProvidedContext.sharedPostgresUrl is declared in ./postgres.ts, the module that injects it.

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Four files at once, each with up to three gateways of 12 connections (pgNode.ts) and its own pools.
  const pg = await startPostgres({ maxConnections: 500 });
  project.provide('sharedPostgresUrl', pg.url);
  return () => pg.stop();
}
