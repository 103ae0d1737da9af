// Prometheus text exposition -> numbers the Overview shows: request rate and p99 per route family
// (from two scrapes' deltas), and plain gauges/counters by name.

/** Samples as { name, labels, value }; comments and malformed lines are skipped. */
export function parseProm(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    const value = Number(m[4]);
    if (!Number.isNaN(value)) out.push({ name: m[1], labels, value });
  }
  return out;
}

export function value(samples, name, labels = {}) {
  let sum = 0, found = false;
  for (const s of samples) {
    if (s.name !== name) continue;
    if (Object.entries(labels).some(([k, v]) => s.labels[k] !== v)) continue;
    sum += s.value;
    found = true;
  }
  return found ? sum : undefined;
}

export function byLabel(samples, name, label) {
  const out = {};
  for (const s of samples) if (s.name === name && s.labels[label] !== undefined) out[s.labels[label]] = (out[s.labels[label]] ?? 0) + s.value;
  return out;
}

/** Per family: { count, errors (4xx/5xx), buckets: [[le, cumulative]] }. */
export function families(samples) {
  const fam = {};
  const of = (f) => (fam[f] ??= { count: 0, errors: 0, buckets: [] });
  for (const s of samples) {
    const f = s.labels.family;
    if (!f) continue;
    if (s.name === 'tagw_http_requests_total') {
      of(f).count += s.value;
      if (Number(s.labels.status) >= 400) of(f).errors += s.value;
    } else if (s.name === 'tagw_http_request_duration_seconds_bucket') {
      of(f).buckets.push([s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value]);
    }
  }
  for (const f of Object.values(fam)) f.buckets.sort((a, b) => a[0] - b[0]);
  return fam;
}

/** The bucket bound under which `q` of the observations fell (cumulative buckets). */
export function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!total) return undefined;
  for (const [le, c] of buckets) if (c >= q * total) return le;
  return Infinity;
}

/** Rates and p99 between two scrapes `dtSec` apart; p99 since start when the window saw nothing. */
export function familyStats(prev, cur, dtSec) {
  const rows = [];
  for (const [name, c] of Object.entries(cur)) {
    const p = prev?.[name];
    const dCount = p ? c.count - p.count : 0;
    const windowBuckets = p ? c.buckets.map(([le, v], i) => [le, v - (p.buckets[i]?.[1] ?? 0)]) : [];
    const inWindow = dCount > 0;
    rows.push({
      family: name, total: c.count, errors: c.errors,
      rate: p && dtSec > 0 ? dCount / dtSec : undefined,
      p99: quantile(inWindow ? windowBuckets : c.buckets, 0.99), p99Window: inWindow,
    });
  }
  return rows.sort((a, b) => a.family.localeCompare(b.family));
}
