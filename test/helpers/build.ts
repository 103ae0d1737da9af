// The compiled build the process-level tests run: `tsc -p tsconfig.build.json` into .test-dist/ (beside
// dist/, so the build's relative paths to config/ and package.json hold), once per test run however
// many test files and workers ask. A process started from it is listening in well under a second;
// one started through tsx compiled the whole tree first, several seconds per start.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = join(import.meta.dirname, '..', '..');
export const BUILD_DIR = join(ROOT, '.test-dist');
const STAMP = join(BUILD_DIR, '.run');
const LOCK = `${BUILD_DIR}.lock`;

/** Set by vitest.config.ts in the main process, inherited by every worker: one id per run. */
const runId = () => process.env.TAGW_TEST_RUN ?? 'standalone';
const built = () => existsSync(STAMP) && readFileSync(STAMP, 'utf8') === runId();

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Builds (or waits for the worker that builds) this run's .test-dist/, then returns its path. */
export function ensureBuilt(): string {
  const deadline = Date.now() + 180_000;
  while (!built()) {
    try {
      mkdirSync(LOCK);
    } catch {
      // Another worker builds it: wait for its stamp, or take over a lock a killed run left behind.
      if (existsSync(LOCK) && Date.now() - statSync(LOCK).mtimeMs > 120_000) rmSync(LOCK, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`.test-dist: no build within 180 s (remove ${LOCK} if a run was killed)`);
      sleepSync(100);
      continue;
    }
    try {
      if (!built()) {
        rmSync(BUILD_DIR, { recursive: true, force: true });
        execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json', '--outDir', BUILD_DIR], { cwd: ROOT, stdio: 'pipe' });
        mkdirSync(BUILD_DIR, { recursive: true });
        writeFileSync(STAMP, runId());
      }
    } finally {
      rmSync(LOCK, { recursive: true, force: true });
    }
  }
  return BUILD_DIR;
}

/** `node` arguments that run this run's built CLI as bin/tagw.js runs it: run(argv), its result as
 *  the exit code (bin/tagw.js itself compiles the sources through tsx when dist/ is older than them). */
export function builtCli(): string[] {
  const url = pathToFileURL(builtEntry('src/cli/main.ts')).href;
  return ['--input-type=module', '-e', `const { run } = await import(${JSON.stringify(url)}); const c = await run(process.argv.slice(1)); if (c !== undefined) process.exitCode = c;`, '--'];
}

/** `node <built entry>` arguments for a source entry such as 'src/main.ts'. */
export function builtEntry(sourcePath: string): string {
  return join(ensureBuilt(), sourcePath.replace(/\.ts$/, '.js'));
}
