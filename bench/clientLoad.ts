// Child process of bench/client.ts: one /v1/stream consumer per turn, either through tagw/client
// (`sdk`) or a plain `ws` socket that JSON-parses each frame (`raw`, what a bot without the SDK does
// at least), recording tick-to-callback latency of the bench's ticks (volume -1) in µs.
import WebSocket from 'ws';
import { TagwClient, type StreamSubscription } from '../src/client/index.js';
import { nowMs, TurnHist } from './streamHist.js';

type Msg = { t: 'turn'; side: 'sdk' | 'raw'; base: string; key: string; id: string; symbols: string[] } | { t: 'stop' } | { t: 'exit' };

let hist = new TurnHist();
let stop: (() => void) | null = null;

function record(data: { volume?: number; timeMscUtc: number }): void {
  if (data.volume === -1) hist.record((nowMs() - data.timeMscUtc) * 1000);
}

async function startSdk(m: Extract<Msg, { t: 'turn' }>): Promise<void> {
  const client = new TagwClient({ baseUrl: m.base, apiKey: m.key, WebSocket });
  const s: StreamSubscription = client.stream(m.id, { symbols: m.symbols });
  let acks = 0;
  await new Promise<void>((resolve) => {
    s.on('SUBSCRIBED', () => ++acks === m.symbols.length && resolve());
    s.on('QUOTE', (f) => record(f.data));
  });
  stop = () => s.close();
}

async function startRaw(m: Extract<Msg, { t: 'turn' }>): Promise<void> {
  const ws = new WebSocket(`${m.base.replace('http', 'ws')}/v1/stream?id=${m.id}&apiKey=${encodeURIComponent(m.key)}`);
  let acks = 0;
  await new Promise<void>((resolve) => {
    ws.on('open', () => ws.send(JSON.stringify({ action: 'subscribe', symbols: m.symbols })));
    ws.on('message', (buf) => {
      const f = JSON.parse(String(buf)) as { type: string; data: { volume?: number; timeMscUtc: number } };
      if (f.type === 'SUBSCRIBED' && ++acks === m.symbols.length) resolve();
      else if (f.type === 'QUOTE') record(f.data);
    });
  });
  stop = () => ws.terminate();
}

process.on('message', (m: Msg) => {
  if (m.t === 'turn') {
    hist = new TurnHist();
    void (m.side === 'sdk' ? startSdk(m) : startRaw(m)).then(() => process.send!({ t: 'ready' }));
  } else if (m.t === 'stop') {
    stop?.();
    stop = null;
    process.send!({ t: 'hist', data: hist.toData() });
  } else {
    process.exit(0);
  }
});
process.send!({ t: 'up' });
