// The compiled build the tests run: `tsc -p tsconfig.build.json` into .test-dist/ (beside dist/, so the
// build's relative paths to config/ and package.json hold). Process-level tests start it, spawned CLIs
// and simulators run it, and test gateways load their shard workers from it: a process or worker
// started from it is ready in a fraction of the time one compiling the sources through tsx takes.
// Its entries are then bundled (bundle.mjs), each one file to load instead of hundreds of modules.
// It is rebuilt only when a source changed (any number of test files, workers and concurrent runs
// share one build), into a side directory swapped in at once, so a run already going keeps finding
// its files.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// Loaded from a build instead (the benches run theirs, dist-bench/, which compiles src/ with this
// file): that build holds every entry already, so it is the one used and nothing is built.
const compiled = !import.meta.url.endsWith('.ts');
/** The repository's root, from the sources (test/helpers/) or from a build one level down. */
export const ROOT = join(import.meta.dirname, ...(compiled ? ['..', '..', '..'] : ['..', '..']));
export const BUILD_DIR = compiled ? join(import.meta.dirname, '..', '..') : join(ROOT, '.test-dist');
const STAMP = join(BUILD_DIR, '.sources');
const LOCK = `${BUILD_DIR}.lock`;

/** What the build is made from: every file under src/, actors/ and config/ and the build's settings,
 *  by path, size and modification time (a checkout or an edit changes it). */
function sourcesKey(): string {
  const h = createHash('sha1');
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const s = statSync(p);
        h.update(`${p}\0${s.size}\0${s.mtimeMs}\n`);
      }
    }
  };
  for (const d of ['src', 'actors', 'config']) if (existsSync(join(ROOT, d))) walk(join(ROOT, d));
  for (const f of ['package.json', 'tsconfig.json', 'tsconfig.build.json', 'test/helpers/bundle.mjs']) {
    const s = statSync(join(ROOT, f));
    h.update(`${f}\0${s.size}\0${s.mtimeMs}\n`);
  }
  return h.digest('hex');
}

const builtFrom = () => (existsSync(STAMP) ? readFileSync(STAMP, 'utf8') : null);

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

let checked = false;

const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** tsc's arguments for the test build into `outDir`. --noCheck: emit without type-checking, the same
 *  files (compared byte for byte) for half the CPU (5-7 s instead of 10-14 s on the 2-vCPU machine).
 *  The types are checked once per run by `npm run typecheck`, which `npm test` runs first; the test
 *  files and what they import in-process are not type-checked by vitest either. A syntax error still
 *  fails the build. --singleThreaded (as `npm run typecheck`): tsc 7's parallel parsers and checkers
 *  repeat work between them, 7.2 CPU-seconds here against 4.3 in one thread, the same files, and on
 *  two shared cores no later. */
const tscArgs = (outDir: string) => [TSC, '-p', 'tsconfig.build.json', '--noCheck', '--singleThreaded', '--outDir', outDir];
/** Bundles the entries processes and threads start from (bundle.mjs: a fifth of the suite's CPU went
 *  to loading their modules). */
const BUNDLE = join(ROOT, 'test', 'helpers', 'bundle.mjs');
const NEXT = `${BUILD_DIR}.next`;

/** Puts the finished build in .next in place, stamped with the sources it was made from. */
function install(key: string): void {
  writeFileSync(join(NEXT, '.sources'), key);
  rmSync(BUILD_DIR, { recursive: true, force: true });
  renameSync(NEXT, BUILD_DIR);
}

/**
 * Starts the build in the background when the sources changed (vitest's globalSetup), so it runs
 * while the workers start and load their first files instead of after; a worker's ensureBuilt()
 * waits for it as for another worker's build (the same lock and stamp). A build that fails leaves
 * no stamp: the first worker builds again and reports tsc's errors. `stop()` (the run's teardown)
 * ends a build nobody waited for (a run of unit tests only).
 */
export function buildInBackground(): { stop(): Promise<void> } {
  const idle = { stop: async () => {} };
  if (compiled) return idle;
  const key = sourcesKey();
  if (builtFrom() === key) return idle;
  try {
    mkdirSync(LOCK);
  } catch {
    return idle; // a build is under way already (another run's)
  }
  rmSync(NEXT, { recursive: true, force: true });
  let step = spawn(process.execPath, tscArgs(NEXT), { cwd: ROOT, stdio: 'ignore' });
  const done = new Promise<void>((resolve) => {
    const finish = (ok: boolean) => {
      try {
        if (ok) install(key);
        // A half-written build (killed at teardown): the next build clears it before it starts.
        else rmSync(NEXT, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // Not removed now: the same; never an exception that would end the run with exit 1.
      } finally {
        rmSync(LOCK, { recursive: true, force: true });
        resolve();
      }
    };
    step.once('exit', (code) => {
      if (code !== 0) return finish(false);
      step = spawn(process.execPath, [BUNDLE, NEXT], { cwd: ROOT, stdio: 'ignore' });
      step.once('exit', (c) => finish(c === 0));
      step.once('error', () => finish(false));
    });
    step.once('error', () => finish(false));
  });
  return {
    async stop() {
      if (step.exitCode === null && step.signalCode === null) step.kill('SIGKILL');
      await done;
    },
  };
}

/** Builds (or waits for the worker that builds) .test-dist/ from the current sources, then returns its path. */
export function ensureBuilt(): string {
  if (checked || compiled) return BUILD_DIR;
  const key = sourcesKey();
  const deadline = Date.now() + 180_000;
  while (builtFrom() !== key) {
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
      if (builtFrom() !== key) {
        rmSync(NEXT, { recursive: true, force: true });
        execFileSync(process.execPath, tscArgs(NEXT), { cwd: ROOT, stdio: 'pipe' });
        execFileSync(process.execPath, [BUNDLE, NEXT], { cwd: ROOT, stdio: 'pipe' });
        install(key);
      }
    } finally {
      rmSync(LOCK, { recursive: true, force: true });
    }
  }
  checked = true;
  return BUILD_DIR;
}

/** `node` arguments that run the built CLI as bin/tagw.js runs it: run(argv), its result as the exit
 *  code (bin/tagw.js itself compiles the sources through tsx when dist/ is older than them). */
export function builtCli(opts: { unbundled?: boolean } = {}): string[] {
  const url = pathToFileURL(builtEntry('src/cli/main.ts', opts)).href;
  return ['--input-type=module', '-e', `const { run } = await import(${JSON.stringify(url)}); const c = await run(process.argv.slice(1)); if (c !== undefined) process.exitCode = c;`, '--'];
}

/** Runs the built CLI (`tagw args...`) with exactly this environment: its exit code and output. */
export function runBuiltCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...builtCli(), ...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** `node <built entry>` arguments for a source entry such as 'src/main.ts': its bundle, or with
 *  `unbundled` the entry as tsc wrote it, which imports the build's modules one by one (a test of what
 *  a process imports: a bundle holds its packages). The benches' build is not bundled. */
export function builtEntry(sourcePath: string, opts: { unbundled?: boolean } = {}): string {
  return join(ensureBuilt(), sourcePath.replace(/\.ts$/, opts.unbundled && !compiled ? '.unbundled.js' : '.js'));
}
