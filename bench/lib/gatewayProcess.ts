// A gateway as its own process, as an operator runs it (`npm start`): tsc's build beside the bench
// (dist-bench/src/main.js), dist/ compiled here when the bench runs from its source, or src/ through
// tsx with `--source` (it compiles at every start and names every function it compiles: slower
// starts, more memory). Its RSS and CPU are then its own, read from /proc.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loaderArgs, moduleBeside } from './launch.js';

export interface GatewayProcess {
  child: ChildProcess; url: string; exited: Promise<void>; listenMs: number;
  /** The first 8 KiB the process wrote (e.g. the inspector's address with `--inspect`). */
  head: string;
}

/** The node arguments that run the gateway; `bench` is the calling bench's import.meta.url. */
export function gatewayEntry(bench: string): { root: string; entry: string[]; build: string } {
  const built = !bench.endsWith('.ts');
  const root = join(new URL('.', bench).pathname, ...(built ? ['..', '..'] : ['..']));
  const fromSource = process.argv.includes('--source');
  if (!fromSource && !built) execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  const sourceMain = join(root, 'src', 'main.ts');
  const entry = fromSource ? [...loaderArgs(sourceMain), sourceMain]
    : [built ? moduleBeside('../src/main.ts', bench) : join(root, 'dist', 'src', 'main.js')];
  return { root, entry, build: fromSource ? 'src (tsx)' : built ? 'dist-bench' : 'dist' };
}

/** Starts the gateway with `env` over the process's own; resolves once it logs that it listens. */
export async function spawnGateway(at: { root: string; entry: string[] }, env: Record<string, string>, nodeArgs: string[] = []): Promise<GatewayProcess> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [...nodeArgs, ...at.entry], { cwd: at.root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info', ...env } });
  let out = '';
  let head = '';
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d.toString();
      if (head.length < 8192) head += d.toString().slice(0, 8192 - head.length);
      const m = /"msg":"gateway listening","url":"([^"]+)"/.exec(out);
      if (m) resolve(m[1]!);
      if (out.length > 1_000_000) out = out.slice(-10_000);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(() => reject(new Error(`gateway exited before listening:\n${out.slice(-2000)}`)));
  });
  return { child, url, exited, listenMs: performance.now() - t0, head };
}

/** Resident set of the process (main and worker threads share it). */
export const rssBytes = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
/** Its parts (MiB): anonymous memory (heaps, malloc), file pages, shared memory (SQLite's WAL index). */
export const rssParts = (pid: number) => {
  const st = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mib = (k: string) => Math.round(Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(st)?.[1] ?? 0) / 1024);
  return { anon: mib('RssAnon'), file: mib('RssFile'), shmem: mib('RssShmem') };
};
/** CPU seconds the process used so far (user + system). */
export const cpuSeconds = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};
/** Each thread's V8 heap in bytes, in use or reserved, from /metrics text (the gateway's last 5 s snapshot). */
export const threadHeaps = (metricsText: string, which: 'used' | 'total'): Record<string, number> => Object.fromEntries(
  [...metricsText.matchAll(new RegExp(`tagw_thread_heap_${which}_bytes\\{thread="([^"]+)"\\} (\\d+)`, 'g'))].map((m) => [m[1]!, Number(m[2])]));
