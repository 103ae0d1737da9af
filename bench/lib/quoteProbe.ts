// A trading client's /GetQuote, one request at a time every `everyMs`, in a process of its own
// (bench/ramp.ts): beside the bench's own bulk creator, in the bench's process, its event loop
// would hold the probe's replies and count as the gateway's time. Told by IPC which phase it is in
// ('phase', name); 'stop' sends back one histogram per phase and exits.
import { Histogram, type HistogramData } from './histogram.js';

export interface ProbeJob {
  url: string; key: string; id: string; symbol: string; cached: '0' | '1'; everyMs: number;
  /** A bare server's URL (bareServer.ts): asked in turn with the gateway, its histograms under 'bare:<phase>'. */
  bare?: string;
}
export type ProbeMessage = { phase: string } | { stop: true };
export type ProbeResult = Record<string, HistogramData>;

if (process.send) {
  const hists = new Map<string, Histogram>();
  let phase = 'warmup';
  let stop = false;
  let job: ProbeJob | undefined;
  process.on('message', (m: ProbeJob | ProbeMessage) => {
    if ('url' in m) {
      job = m;
      void run();
    } else if ('phase' in m) phase = m.phase;
    else stop = true;
  });
  const run = async () => {
    const j = job!;
    const path = `${j.url}/GetQuote?id=${j.id}&symbol=${j.symbol}${j.cached === '0' ? '&cached=0' : ''}`;
    const headers = { 'x-api-key': j.key };
    let turn = 0;
    while (!stop) {
      const bare = j.bare !== undefined && turn++ % 2 === 1;
      const at = phase;
      const t = performance.now();
      const r = await fetch(bare ? `${j.bare}/bare` : path, { headers });
      await r.arrayBuffer();
      const us = (performance.now() - t) * 1000;
      if (r.status === 200 && at === phase) {
        const name = bare ? `bare:${at}` : at;
        let h = hists.get(name);
        if (!h) hists.set(name, (h = new Histogram()));
        h.record(us);
      }
      await new Promise((res) => setTimeout(res, j.everyMs));
    }
    const out: ProbeResult = Object.fromEntries([...hists].map(([k, h]) => [k, h.toJSON()]));
    process.send!(out, () => process.exit(0));
  };
}
