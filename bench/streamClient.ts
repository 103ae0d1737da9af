// Child process of bench/stream.ts: opens N WebSocket clients, subscribes them, and records
// tick-to-client latency (receive wall clock - the tick's intended time carried in timeMscUtc)
// in a µs histogram. Frames are not JSON-parsed, not even made strings: the timestamp is cut out
// of the received bytes (bench/lib/rawWs.ts), so the client costs as little as possible per frame.
import { openRawWs, type RawWs } from './lib/rawWs.js';
import { nowMs, StreamHist, TurnHist } from './streamHist.js';

export interface ClientJob {
  url: string;
  sockets: number;
  symbols: string[];
  /** gateway: send subscribe messages and wait for SUBSCRIBED acks; baseline: the server subscribes on open. */
  mode: 'gateway' | 'baseline';
  /** This many of the sockets stop reading once subscribed (deliberately slow readers, not measured). */
  slow?: number;
  /** Slow sockets also subscribe candles of the first symbol in this timeframe (a topic only they
   *  have, through which the bench fills their buffers without loading the readers). */
  slowTimeframe?: string;
  /** Keep each measured frame's stamp and receipt (the cluster bench pairs them across paths). */
  trace?: boolean;
}

type Parent = { t: 'job'; job: ClientJob } | { t: 'measure' } | { t: 'turn'; id: number } | { t: 'report' } | { t: 'close' };

const hist = new StreamHist();
/** Per measuring turn of the interleaved bench (its parent names the turn as it starts). */
const turns = new Map<number, TurnHist>();
let turn: TurnHist | null = null;
/** With job.trace: [stamp ms, receipt ms] of each measured frame, flattened. */
let trace: number[] | null = null;
let frames = 0;
let measuring = false;
let measureStart = 0;
let cpuStart = process.cpuUsage();
const sockets: RawWs[] = [];
const KEY = Buffer.from('"timeMscUtc":');
const MARK = Buffer.from('"volume":-1}}');

function onMessage(buf: Buffer, start: number, end: number): void {
  if (!measuring) return;
  // Only the bench's own ticks (volume -1), should anything else reach the socket.
  if (end - start < MARK.length || buf.compare(MARK, 0, MARK.length, end - MARK.length, end) !== 0) return;
  const i = buf.indexOf(KEY, start);
  if (i < 0 || i >= end) return;
  const j = i + KEY.length;
  let k = j;
  while (k < end && buf[k] !== 44 && buf[k] !== 125) k++;
  const sent = Number(buf.toString('latin1', j, k));
  const now = nowMs();
  const us = (now - sent) * 1000;
  trace?.push(sent, now);
  hist.record(us);
  turn?.record(us);
  frames++;
}

async function open(job: ClientJob): Promise<void> {
  const batch = 100;
  let slowLeft = job.slow ?? 0;
  for (let i = 0; i < job.sockets; i += batch) {
    const n = Math.min(batch, job.sockets - i);
    await Promise.all(Array.from({ length: n }, () => new Promise<void>((resolve, reject) => {
      const slow = slowLeft > 0;
      if (slow) slowLeft--;
      let socket: RawWs | undefined;
      const ready = () => {
        // A slow reader: the TCP socket stops reading, so the server's buffers for it fill up.
        if (slow) socket?.pause();
        resolve();
      };
      let acks = 0;
      const subscribing = job.mode === 'gateway';
      openRawWs(job.url, (buf, start, end) => {
        if (subscribing && acks < job.symbols.length) {
          const t = buf.toString('utf8', start, end);
          if (t.startsWith('{"type":"SUBSCRIBED"')) {
            if (++acks === job.symbols.length) ready();
          } else if (t.startsWith('{"type":"ERROR"')) reject(new Error(t));
          return;
        }
        onMessage(buf, start, end);
      }).then((ws) => {
        sockets.push(socket = ws);
        if (!subscribing) ready();
        else {
          job.symbols.forEach((s, k) => ws.send(JSON.stringify(
            slow && k === 0 && job.slowTimeframe ? { action: 'subscribe', symbol: s, timeframe: job.slowTimeframe } : { action: 'subscribe', symbol: s })));
        }
      }, reject);
    })));
  }
}

process.on('message', (m: Parent) => {
  void (async () => {
    if (m.t === 'job') {
      try {
        if (m.job.trace) trace = [];
        await open(m.job);
        process.send!({ t: 'ready' });
      } catch (e) {
        process.send!({ t: 'error', message: (e as Error).message });
      }
    } else if (m.t === 'measure') {
      hist.reset();
      turns.clear();
      turn = null;
      if (trace) trace = [];
      frames = 0;
      measuring = true;
      measureStart = nowMs();
      cpuStart = process.cpuUsage();
    } else if (m.t === 'turn') {
      turn = new TurnHist();
      turns.set(m.id, turn);
    } else if (m.t === 'report') {
      measuring = false;
      const seconds = (nowMs() - measureStart) / 1000;
      const cpu = process.cpuUsage(cpuStart);
      process.send!({
        t: 'report', hist: hist.toData(), frames, seconds, cpuPct: ((cpu.user + cpu.system) / 1e6 / seconds) * 100,
        turns: [...turns].map(([id, h]) => [id, h.toData()]),
        ...(trace ? { trace } : {}),
      });
    } else if (m.t === 'close') {
      for (const ws of sockets) ws.terminate();
      process.exit(0);
    }
  })();
});
