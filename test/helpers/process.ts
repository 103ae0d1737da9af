// The gateway as an operator runs it: a child process started like `npm start` does, on port 0
// with its own temp DATA_DIR unless one is given. Call `cleanupProcesses` in afterEach.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtEntry, ROOT } from './build.js';
import { TEST_SHARDS } from './testShards.js';

export { ROOT };
export const MAIN = join(ROOT, 'src', 'main.ts');
/** The gateway's entry in this run's build, built while the test file loads (outside any test's timeout). */
export const BUILT_MAIN = builtEntry('src/main.ts');

const dirs: string[] = [];
const procs: ChildProcess[] = [];

/** A temp directory removed by cleanupProcesses. */
export function tempDir(prefix = 'tagw-proc-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** SIGKILLs every process still running and removes the temp directories. */
export function cleanupProcesses(): void {
  for (const p of procs.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export interface GatewayProcess {
  child: ChildProcess;
  dir: string;
  /** The exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** The URL from the "gateway listening" log line; rejects if the process exits first. */
  listening: Promise<string>;
  output(): string;
}

/** Starts the gateway from this run's compiled build (helpers/build.ts) unless `argv` says otherwise. */
export function startProcess(env: Record<string, string>, dataDir?: string, argv: string[] = [BUILT_MAIN], command = process.execPath): GatewayProcess {
  const dir = dataDir ?? tempDir();
  const child = spawn(command, argv, {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, SHARDS: String(TEST_SHARDS), ...env },
    stdio: ['ignore', 'pipe', 'pipe'], cwd: ROOT,
  });
  procs.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const m = /"msg":"gateway listening","url":"([^"]+)"/.exec(out);
      if (m) {
        clearInterval(timer);
        resolve(m[1]!);
      }
    }, 20);
    void exited.then((code) => {
      clearInterval(timer);
      reject(new Error(`exited ${code}: ${out}`));
    });
  });
  listening.catch(() => {}); // observed by tests that expect a start; others check `exited`
  return { child, dir, exited, listening, output: () => out };
}
