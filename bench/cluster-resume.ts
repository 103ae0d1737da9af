// npm run bench -- cluster-resume [--rounds N]
//
// What a resume costs when it comes from JetStream (cluster mode: a client resuming on another node)
// against the single node's replay from memory, in the same run: 1,000 missed account frames of one
// account, the stream holding 10,000 frames of ten accounts interleaved (so the bisection has work),
// on a real nats-server -js over loopback. Also what storing a batch costs (the owner sends a batch
// only after JetStream acknowledged it): 10 frames per append, awaited. Prints one JSON line.
import { loadavg } from 'node:os';
import { connect } from '@nats-io/transport-node';
import { JetStreamHistory } from '../src/cluster/jsHistory.js';
import { AccountHistory } from '../src/stream/history.js';
import { startNats } from '../test/helpers/engines.js';
import { watchHost } from './lib/hostFacts.js';

const machineFacts = watchHost();

const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 30;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const data = (i: number) => `{"ticket":${i},"symbol":"EURUSD","volume":0.01,"price":1.1,"profit":0,"comment":"${'x'.repeat(200)}"}`;

const nats = await startNats();
const nc = await connect({ servers: nats.url });
try {
  const limits = { maxEvents: 10_000, maxAgeMs: 600_000 };
  const js = await JetStreamHistory.open({ nc, limits });
  const mem = new AccountHistory('bench', 0, limits);
  const deal = { ticket: 0, timeMsc: 0 };
  const appendUs: number[] = [];
  for (let seq = 1; seq <= 2_000; seq += 10) {
    for (let a = 0; a < 10; a++) {
      const frames = Array.from({ length: 10 }, (_, i) => ({ epoch: 'bench', seq: seq + i, frame: `{"type":"TRADE","seq":${seq + i},"epoch":"bench","data":${data(seq + i)}}`, deal }));
      const t = performance.now();
      await js.append(`acct-${a}`, frames);
      appendUs.push((performance.now() - t) * 1000);
      if (a === 0) for (const f of frames) mem.append('TRADE', data(f.seq), Date.now());
    }
  }
  const since = { epoch: 'bench', seq: 1_000 };
  const fromJs: number[] = [];
  const fromMem: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let t = performance.now();
    const a = await js.replay('acct-0', since);
    fromJs.push(performance.now() - t);
    t = performance.now();
    const b = mem.replay(since, Date.now());
    fromMem.push(performance.now() - t);
    if (!a.recovered || !b.recovered || a.entries.length !== 1_000 || b.entries.length !== 1_000) throw new Error('replay did not recover 1,000 frames');
  }
  console.log(JSON.stringify({
    machine: machineFacts(),
    bench: 'cluster-resume', missed: 1_000, streamFrames: 20_000, rounds, load1: Number(loadavg()[0]!.toFixed(1)),
    jetstreamReplayMs: { p50: +pct(fromJs, 50).toFixed(2), p99: +pct(fromJs, 99).toFixed(2) },
    memoryReplayMs: { p50: +pct(fromMem, 50).toFixed(3), p99: +pct(fromMem, 99).toFixed(3) },
    appendOf10FramesUs: { p50: Math.round(pct(appendUs, 50)), p99: Math.round(pct(appendUs, 99)) },
  }));
} finally {
  await nc.close();
  await nats.stop();
}
