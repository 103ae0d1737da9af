// The gateway's log on a full disk (or to a reader that went away) must not take it down. Found
// driving a bot through a full DATA_DIR with the log on the same volume: the very line saying
// "DATA_DIR is full: trading calls answer 503 STORAGE_UNAVAILABLE" killed the gateway (an ENOSPC
// 'error' event on stdout nobody handled), so the bot saw NETWORK_ERROR, not the 503. /dev/full
// fails every write with ENOSPC, as a full file system does.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/** Runs `script` (ES module, tsx) with stdout to `stdoutPath`; its exit code and stderr. */
function run(script: string, stdoutPath: string): Promise<{ code: number | null; err: string }> {
  const out = openSync(stdoutPath, 'w');
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: process.cwd(), stdio: ['ignore', out, 'pipe'] });
  closeSync(out);
  let err = '';
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, err })));
}

describe('log lines stdout refuses', () => {
  it('are dropped and counted; the process lives on', async () => {
    const script = `
      import * as L from './src/log.ts';
      const log = L.createLogger('info');
      for (let i = 0; i < 3; i++) {
        log.error('DATA_DIR is full', { i });
        await new Promise((r) => setTimeout(r, 20));
      }
      process.stderr.write('alive, dropped ' + L.droppedLogLines?.());
    `;
    const r = await run(script, '/dev/full');
    expect(r.err).toContain('alive, dropped 3');
    expect(r.code).toBe(0);
    // A file that takes them gets every line, none dropped.
    const dir = mkdtempSync(join(tmpdir(), 'tagw-log-'));
    try {
      const ok = await run(script, join(dir, 'gateway.log'));
      expect(ok).toMatchObject({ code: 0 });
      expect(ok.err).toContain('alive, dropped 0');
      expect(readFileSync(join(dir, 'gateway.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l).i)).toEqual([0, 1, 2]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('on a file system that fills up: the lines written once space is freed are there, a shard thread\'s too', async () => {
    const mnt = mkdtempSync(join(tmpdir(), 'tagw-logfs-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', mnt], { stdio: 'pipe' });
    } catch (err) {
      rmSync(mnt, { recursive: true, force: true });
      throw new Error(`this test mounts a 1 MiB tmpfs and needs root (or CAP_SYS_ADMIN), as disk-full.test.ts: ${String(err)}`);
    }
    try {
      mkdirSync(join(mnt, 'd'));
      const script = `
        import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
        import { Worker } from 'node:worker_threads';
        import * as L from './src/log.ts';
        const log = L.createLogger('info');
        const filler = ${JSON.stringify(join(mnt, 'filler'))};
        // Filled before the log's first line: the line needs a page the file system no longer has.
        const fd = openSync(filler, 'w');
        for (const b of [Buffer.alloc(65536), Buffer.alloc(1)]) { try { for (;;) writeSync(fd, b); } catch {} }
        closeSync(fd);
        log.error('DATA_DIR is full', { i: 'B' });
        await new Promise((r) => setTimeout(r, 20));
        rmSync(filler);
        log.error('space freed', { i: 'C' });
        // A shard thread's stdout reaches the file through this thread's.
        const w = new Worker("process.stdout.write(JSON.stringify({ msg: 'from a shard', i: 'D' }) + String.fromCharCode(10))", { eval: true });
        await new Promise((r) => w.on('exit', r));
        process.stderr.write('alive, dropped ' + L.droppedLogLines?.());
      `;
      const r = await run(script, join(mnt, 'd', 'gateway.log'));
      expect(r.err).toContain('alive, dropped 1');
      expect(r.code).toBe(0);
      expect(readFileSync(join(mnt, 'd', 'gateway.log'), 'utf8').trim().split('\n').map((l) => JSON.parse(l).i)).toEqual(['C', 'D']);
    } finally {
      execFileSync('umount', [mnt]);
      rmSync(mnt, { recursive: true, force: true });
    }
  });
});
