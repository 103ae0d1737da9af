// A load-generating child process: raw keep-alive HTTP/1.1 over net sockets with TCP_NODELAY,
// closed loop (one request in flight per connection), µs latency histogram. Node's own http
// client would be the bottleneck long before the server; this one costs a write and a parse.
import { realpathSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Histogram } from './histogram.js';

export interface LoadJob {
  port: number;
  /** Path; `{seq}` is replaced by a per-request unique token. */
  path: string;
  /** Several paths, used in turn (overrides `path`). */
  paths?: string[];
  method?: string;
  headers?: Record<string, string>;
  connections: number;
  durationMs: number;
  warmupMs: number;
  /** Stop after this many measured requests (all connections together). */
  maxRequests?: number;
  /** Send at most this many requests, warm-up included, and stop when all are answered: a budget
   *  of orders the accounts can take whatever the rate (a faster gateway sends more in its warm-up). */
  maxSent?: number;
}

export interface LoadResult {
  requests: number;
  /** Requests sent, warm-up included. */
  sent: number;
  errors: number;
  statuses: Record<string, number>;
  seconds: number;
  hist: ReturnType<Histogram['toJSON']>;
}

interface LoadState { measuring: boolean; stop: boolean; hist: Histogram; requests: number; errors: number; statuses: Map<number, number>; sent: number; answered: number }

function runConnection(job: LoadJob, conn: number, state: LoadState): Promise<void> {
  return new Promise((resolve) => {
    const sock: Socket = connect({ port: job.port, host: '127.0.0.1', noDelay: true });
    const fixedHeaders = Object.entries({ host: '127.0.0.1', ...job.headers }).map(([k, v]) => `${k}: ${v}\r\n`).join('');
    // Connections start at different places in `paths`, as independent clients would: started
    // together at 0 they would all hit the same account at the same moment, then the next.
    let seq = job.paths ? (conn * 7919 + process.pid) % job.paths.length : 0;
    let buf: Buffer = Buffer.alloc(0);
    let started = 0n;
    const send = () => {
      if (state.stop || (job.maxSent !== undefined && state.sent >= job.maxSent)) {
        sock.end();
        return;
      }
      state.sent++;
      const base = job.paths ? job.paths[seq % job.paths.length]! : job.path;
      const path = base.includes('{seq}') ? base.replace('{seq}', `${process.pid}-${conn}-${seq}`) : base;
      seq++;
      started = process.hrtime.bigint();
      sock.write(`${job.method ?? 'GET'} ${path} HTTP/1.1\r\n${fixedHeaders}\r\n`);
    };
    sock.on('connect', send);
    sock.on('data', (d: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buf.subarray(0, end).toString('latin1');
        const m = /content-length:\s*(\d+)/i.exec(head);
        const len = m ? Number(m[1]) : 0;
        if (buf.length < end + 4 + len) return;
        const status = Number(head.slice(9, 12));
        buf = buf.subarray(end + 4 + len);
        const us = Number(process.hrtime.bigint() - started) / 1000;
        if (job.maxSent !== undefined && ++state.answered >= job.maxSent) state.stop = true;
        if (state.measuring) {
          state.hist.record(us);
          state.requests++;
          state.statuses.set(status, (state.statuses.get(status) ?? 0) + 1);
          if (status >= 400) state.errors++;
          if (job.maxRequests && state.requests >= job.maxRequests) state.stop = true;
        }
        send();
      }
    });
    sock.on('error', () => {
      state.errors++;
      resolve();
    });
    sock.on('close', () => resolve());
  });
}

export async function runLoad(job: LoadJob): Promise<LoadResult> {
  const state: LoadState = { measuring: false, stop: false, hist: new Histogram(), requests: 0, errors: 0, statuses: new Map<number, number>(), sent: 0, answered: 0 };
  const conns = Array.from({ length: job.connections }, (_, i) => runConnection(job, i, state));
  await new Promise((r) => setTimeout(r, job.warmupMs));
  state.measuring = true;
  const t0 = performance.now();
  await new Promise<void>((r) => {
    const timer = setTimeout(r, job.durationMs);
    const poll = setInterval(() => {
      if (state.stop) {
        clearTimeout(timer);
        clearInterval(poll);
        r();
      }
    }, 5);
    timer.unref();
    setTimeout(() => clearInterval(poll), job.durationMs + 10).unref();
  });
  const seconds = (performance.now() - t0) / 1000;
  state.measuring = false;
  state.stop = true;
  await Promise.race([Promise.all(conns), new Promise((r) => setTimeout(r, 2_000))]);
  return { requests: state.requests, sent: state.sent, errors: state.errors, statuses: Object.fromEntries(state.statuses), seconds, hist: state.hist.toJSON() };
}

// As a child process started on this file (not merely imported by one with an IPC channel, such as
// a test worker): receive a job over IPC, send the result back.
if (process.send && process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.once('message', (job: LoadJob) => {
    void runLoad(job).then((r) => {
      process.send!(r, () => process.exit(0));
    });
  });
}
