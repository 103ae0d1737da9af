// Overview: the gateway's own figures, refreshed every 2 s: /v1/status (version, uptime, shards,
// accounts per connection phase; in cluster mode the nodes, leases and calls between nodes) and
// /metrics (request rates and p99 per route family, stream; a full DATA_DIR, docs/storage.md; the
// node's queue of account creations, docs/rate-limits.md), and the simulated market clock (SIM_START).
import { api, metricsText } from '../api.js';
import { TimeChart } from '../chart.js';
import { ClusterPanel } from '../cluster.js';
import { html, useRef } from '../lib.js';
import { byLabel, families, familyStats, parseProm, value } from '../prom.js';
import { Badge, duration, Err, ms, Top, usePoll } from '../ui.js';

const PHASES = ['connected', 'connecting', 'reconnecting', 'refused'];
/** Points kept for the throughput chart: 5 minutes at one scrape every 2 s. */
const POINTS = 150;
const COLORS = { classic: '#38bdf8', gateway: '#a78bfa', provisioning: '#f59e0b', news: '#22c55e', ops: '#64748b', stream: '#f472b6' };

const utc = (iso) => `${iso.replace('T', ' ').slice(0, 19)} UTC`;

/** The embedded simulator's market clock when it is not the wall clock (SIM_START, or the clock
 *  DATA_DIR keeps): quotes, candles and market hours follow it, not the time at the top. */
function SimClock({ clock }) {
  if (!clock) return null;
  return html`<div class="sim-clock" data-testid="sim-clock"><span class="badge b-info">simulated clock</span>
    <span>market time <b data-testid="sim-now">${utc(clock.now)}</b></span>
    <span class="muted small">the embedded simulator started at ${utc(clock.start)} (SIM_START): quotes, candles and market hours follow this clock, not the wall clock</span></div>`;
}

export function Overview({ title }) {
  const prev = useRef(null);
  const { data, error, at } = usePoll(async () => {
    // One after the other: the only request of this page in flight while /metrics counts is /metrics itself.
    const status = await api.get('/v1/status');
    const text = await metricsText();
    const samples = parseProm(text);
    const fam = families(samples);
    const now = performance.now();
    const stats = familyStats(prev.current?.fam, fam, prev.current ? (now - prev.current.t) / 1000 : 0);
    const series = prev.current?.series ?? { t: [], byFamily: {} };
    if (prev.current) {
      // One point per scrape: each family's rate over the last interval (0 for a family not seen yet).
      series.t.push(Math.round(Date.now() / 1000));
      for (const r of stats) (series.byFamily[r.family] ??= new Array(series.t.length - 1).fill(0)).push(r.rate ?? 0);
      for (const ys of Object.values(series.byFamily)) while (ys.length < series.t.length) ys.push(0);
      if (series.t.length > POINTS) {
        series.t.splice(0, series.t.length - POINTS);
        for (const ys of Object.values(series.byFamily)) ys.splice(0, ys.length - POINTS);
      }
    }
    prev.current = { fam, t: now, series };
    const names = Object.keys(series.byFamily).sort();
    const chart = { series: names.map((n) => ({ label: n, stroke: COLORS[n] ?? '#e2e8f0' })), data: [[...series.t], ...names.map((n) => [...series.byFamily[n]])] };
    return { status, samples, stats, chart };
  }, 2000);
  if (!data) return html`<${Top} title=${title} /><${Err} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const { status, samples, stats, chart } = data;
  const phases = status.accounts ?? {};
  // A cluster node's phases are the accounts it runs: the cluster's other bound accounts run on other
  // nodes (their leases), or wait for one (unowned); only what is left has no broker login.
  const cl = status.cluster;
  const elsewhere = cl ? cl.nodes.filter((n) => n.nodeId !== cl.nodeId).reduce((n, x) => n + x.accounts, 0) : 0;
  const bound = cl ? cl.nodes.reduce((n, x) => n + x.accounts, 0) + cl.unowned : PHASES.reduce((n, p) => n + (phases[p] ?? 0), 0);
  const shardsUp = status.shards.filter((s) => s.ready).length;
  const sockets = value(samples, 'tagw_stream_sockets') ?? 0;
  const coalescing = value(samples, 'tagw_stream_coalescing_sockets') ?? 0;
  const slowCloses = value(samples, 'tagw_stream_backpressure_closes_total') ?? 0;
  // The gauge counts the /metrics request that read it: the others are the gateway's real load.
  const inflight = Math.max(0, (value(samples, 'tagw_http_inflight_requests') ?? 1) - 1);
  const quotes = value(samples, 'tagw_stream_quotes_published_total');
  const brokerPhases = byLabel(samples, 'tagw_broker_connections', 'phase');
  const diskFull = value(samples, 'tagw_storage_available') === 0;
  const shardsWaiting = value(samples, 'tagw_storage_shards_waiting') ?? 0;
  const totalRate = stats.reduce((n, r) => n + (r.rate ?? 0), 0);
  // The node's admission queue of account creations (broker logins of new or re-bound accounts): said
  // only once one ran, waits or was refused since the start, not a line of zeros.
  const creations = ['tagw_account_creations_running', 'tagw_account_creations_queued', 'tagw_account_creations_refused_total'].map((n) => value(samples, n) ?? 0);
  return html`
    <${Top} title=${title} at=${at} error=${error} />
    <${Err} error=${error} />
    ${diskFull ? html`<div class="err" role="alert" data-testid="disk-full">The disk holding DATA_DIR is full: trading calls answer 503 STORAGE_UNAVAILABLE until space is freed${shardsWaiting > 0 ? html`; ${shardsWaiting === 1 ? '1 shard\'s' : `${shardsWaiting} shards'`} background writes wait in memory` : null}. See /readyz.</div>` : null}
    <${SimClock} clock=${status.simClock} />
    <div class="grid g4">
      <div class="panel stat" data-testid="version"><div class="l">Version</div><div class="v">${status.version}</div><div class="s">API ${status.apiVersion} · Node ${status.node}</div></div>
      <div class="panel stat"><div class="l">Uptime</div><div class="v" data-testid="uptime">${duration(status.uptimeSec)}</div><div class="s">since ${status.startedAt.replace('T', ' ').slice(0, 19)} UTC</div></div>
      <div class="panel stat"><div class="l">Shards</div><div class="v">${shardsUp} / ${status.shards.length} up</div><div class="s">${status.shards.reduce((n, s) => n + s.restarts, 0)} restarts · ${status.seats} seats</div></div>
      <div class="panel stat"><div class="l">HTTP</div><div class="v">${totalRate.toFixed(1)} req/s</div><div class="s" data-testid="inflight">${inflight} other in flight</div>
        ${creations.some((n) => n > 0) ? html`<div class="s" data-testid="creations" title="account creations on this node (broker logins of new or re-bound accounts): running now, waiting for a place, refused 429 ACCOUNT_CREATION_BUSY since the start"><span class="nowrap">account creations:</span> <span class="nowrap">${creations[0]} running ·</span> <span class="nowrap">${creations[1]} queued ·</span> <span class="nowrap">${creations[2]} refused</span></div>` : null}</div>
    </div>
    <${ClusterPanel} cluster=${status.cluster} />
    <div class="grid g3">
      <div class="panel">
        <h2>Accounts by connection state</h2>
        <table data-testid="phases"><tbody>
          ${PHASES.map((p) => html`<tr><td><${Badge} value=${p} /></td><td class="num">${phases[p] ?? brokerPhases[p] ?? 0}</td></tr>`)}
          ${cl ? html`<tr><td class="muted">running on other nodes</td><td class="num" data-testid="phases-elsewhere">${elsewhere}</td></tr>` : null}
          <tr><td class="muted">seats without a broker login</td><td class="num" data-testid="phases-unbound">${Math.max(0, status.seats - bound)}</td></tr>
        </tbody></table>
      </div>
      <div class="panel">
        <h2>Shards</h2>
        <table><thead><tr><th>#</th><th>health</th><th class="num">accounts</th><th class="num">restarts</th></tr></thead><tbody>
          ${status.shards.map((s) => html`<tr><td>${s.index}</td><td><${Badge} value=${s.ready ? 'up' : 'down'} /></td><td class="num">${s.accounts}</td><td class="num">${s.restarts}</td></tr>`)}
        </tbody></table>
      </div>
      <div class="panel">
        <h2>Streams</h2>
        <table data-testid="streams"><tbody>
          <tr><td>/v1/stream sockets</td><td class="num">${sockets}</td></tr>
          <tr><td>coalescing (slow readers)</td><td class="num">${coalescing}</td></tr>
          <tr><td>slow-consumer closes</td><td class="num">${slowCloses}</td></tr>
          <tr><td>quotes published</td><td class="num">${quotes ?? '—'}</td></tr>
        </tbody></table>
      </div>
    </div>
    <div class="panel">
      <h2>Requests per second by route family <span class="muted small">last 5 minutes, UTC</span></h2>
      ${chart.data[0].length === 0 ? html`<p class="note" data-testid="throughput-waiting">The first point comes with the next reading of /metrics, every 2 s: a rate needs two.</p>` : null}
      <${TimeChart} testid="throughput" height=${180} windowSec=${300} yFromZero=${true} series=${chart.series} data=${chart.data} yValue=${(v) => v.toFixed(1)} />
    </div>
    <div class="panel">
      <h2>Requests per route family <span class="muted small">p99 over the last 2 s (since start when idle)</span></h2>
      <table data-testid="families"><thead><tr><th>family</th><th class="num">req/s</th><th class="num">p99</th><th class="num wide-only">requests</th><th class="num" title="answers with a 4xx or 5xx status">errors</th></tr></thead><tbody>
        ${stats.length === 0 ? html`<tr><td colspan="5" class="empty">No requests yet.</td></tr>` : stats.map((r) => html`<tr>
          <td>${r.family}</td><td class="num">${r.rate === undefined ? '—' : r.rate.toFixed(1)}</td>
          <td class="num">${ms(r.p99)}${r.p99Window ? '' : html` <span class="muted small">(all)</span>`}</td>
          <td class="num wide-only">${r.total}</td><td class="num">${r.errors}</td></tr>`)}
      </tbody></table>
    </div>`;
}
