// Per-file CPU, for finding what the suite spends its CPU on (not for assertions): with
// TEST_CPU_OUT=path set (`TEST_CPU_OUT=/tmp/cpu.jsonl npm test`), vitest.config.ts adds this setup
// file, and after each test file it appends one JSON line to that path: the file, its wall seconds,
// and the CPU seconds its worker and the worker's reaped children (gateway processes, Chromium,
// engines, CLIs) used since the worker's previous file ended (so loading the file counts; a worker's
// first file counts the worker's start), and `unreaped`: what the browser files' Chromium spent that
// no reaped time shows (procCpu.ts; not in /usr/bin/time's figure for npm test either). Wall time
// follows the machine's load; CPU much less. The shared PostgreSQL runs under vitest's main process
// and is not counted here; nor are other grandchildren a killed child left behind.
import { appendFileSync } from 'node:fs';
import { afterAll, beforeAll } from 'vitest';
import { procCpu, unreapedCpu } from './procCpu.js';

function cpu(): { self: number; children: number; unreaped: number } {
  const { self, children } = procCpu('self')!;
  return { self, children, unreaped: unreapedCpu() };
}

// On globalThis: files share their worker's module cache, but this setup file runs again for each.
const g = globalThis as { __tagwCpuLast?: ReturnType<typeof cpu> };
let file = '';
let started = 0;
// eslint-disable-next-line no-empty-pattern -- vitest wants a destructuring pattern for the context
beforeAll(({}, suite) => {
  file = (suite as { filepath?: string; file?: { filepath: string } }).filepath ?? (suite as { file?: { filepath: string } }).file?.filepath ?? '?';
  started = Date.now();
  g.__tagwCpuLast ??= { self: 0, children: 0, unreaped: 0 };
});
afterAll(() => {
  const now = cpu();
  const last = g.__tagwCpuLast!;
  const line = {
    file: file.replace(/^.*?(?=test\/)/, ''),
    wall: (Date.now() - started) / 1000,
    self: Math.round((now.self - last.self) * 100) / 100,
    children: Math.round((now.children - last.children) * 100) / 100,
    // Chromium's renderers and GPU process, which no reaped time counts (procCpu.ts).
    unreaped: Math.round((now.unreaped - last.unreaped) * 100) / 100,
    pid: process.pid,
  };
  g.__tagwCpuLast = now;
  appendFileSync(process.env.TEST_CPU_OUT!, `${JSON.stringify(line)}\n`);
});
