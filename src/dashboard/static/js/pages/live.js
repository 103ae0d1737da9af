// Live account view: quotes, positions, orders and trades over /v1/stream, and a price chart from
// PriceHistoryV2 kept current by CANDLE frames. The console uses a read-only key scoped to this
// account (SPEC §5.10), one per account and browser, kept in localStorage and reused by every tab
// (docs/dashboard.md, "Live view keys"); the management key never goes near the stream.
import { api, LIVE_KEY, LIVE_LABEL, session } from '../api.js';
import { html, useEffect, useMemo, useRef, useState } from '../lib.js';
import { Badge, emptyText, Err, short, Top, usePoll, utc } from '../ui.js';
import { TimeChart } from '../chart.js';

const MAX_TRADES = 50;
const PRICE_SERIES = [
  { label: 'close', stroke: '#38bdf8' },
  { label: 'high', stroke: 'rgba(34,197,94,.45)', width: 1 },
  { label: 'low', stroke: 'rgba(239,68,68,.45)', width: 1 },
];

/** Requests under way, by account: the socket and the chart ask at the same time, and get one key. */
const asking = new Map();
/** A live-view key nobody used for this long was left by a browser that lost it: every open live
 *  view uses its key every 2 s (the account summary), and a hidden tab's timers still run. */
const ABANDONED_MS = 3600_000;

/**
 * The account's live-view key: the one this browser keeps (localStorage, every tab), checked still
 * live on the seat's key list; else a new one, kept. With the list at hand, the seat's other
 * live-view keys unused for ABANDONED_MS are revoked (best effort): a browser that crashed, lost its
 * storage or closed a private window cannot leave keys for ever. `refused`: the key the caller used
 * and the gateway refused (revoked): not taken again, but a newer one another tab kept is.
 */
function liveKey(id, refused = null) {
  if (!asking.has(id)) asking.set(id, keyFor(id, refused).finally(() => asking.delete(id)));
  return asking.get(id);
}

async function keyFor(id, refused) {
  const name = `${LIVE_KEY}${id}`;
  let kept = null;
  try { kept = JSON.parse(localStorage.getItem(name)); } catch { /* not ours: replaced below */ }
  // 404 (no such seat, or another customer's): the caller says the account is gone.
  const { keys } = await api.get(`/v1/seats/${encodeURIComponent(id)}/keys`);
  const reuse = kept?.id && kept.key && kept.key !== refused && keys.some((k) => k.id === kept.id && !k.revoked);
  const abandoned = keys.filter((k) => k.label === LIVE_LABEL && !k.revoked && k.id !== kept?.id
    && Date.now() - Date.parse(k.lastUsedAt ?? k.createdAt) > ABANDONED_MS);
  for (const k of abandoned) api.del(`/v1/keys/${encodeURIComponent(k.id)}`).catch(() => undefined);
  if (reuse) return kept.key;
  const k = await api.post(`/v1/seats/${encodeURIComponent(id)}/keys`, { label: LIVE_LABEL, readOnly: true, accountScoped: true });
  localStorage.setItem(name, JSON.stringify({ id: k.id, key: k.key }));
  return k.key;
}

function digitsOf(x) {
  const s = String(x);
  const i = s.indexOf('.');
  return i < 0 ? 0 : Math.min(6, s.length - i - 1);
}

function Picker() {
  const { data, error } = usePoll(async () => {
    const [seats, conns] = await Promise.all([api.get('/v1/seats'), api.get('/v1/accounts/connections')]);
    const c = Object.fromEntries(conns.accounts.map((a) => [a.id, a]));
    return seats.seats.filter((s) => s.status === 'ACTIVE' && c[s.id]?.server).map((s) => ({ ...s, conn: c[s.id] }));
  }, 3000);
  return html`<${Err} error=${error} /><div class="panel"><h2>Choose an account</h2>
    <table><thead><tr><th>account id</th><th>broker</th><th>connection</th><th></th></tr></thead><tbody>
      ${(data ?? []).length === 0 ? html`<tr><td colspan="4" class="empty">${emptyText(data, error, 'No ACTIVE account with a broker login yet (Seats & accounts: bind a login).')}</td></tr>` : null}
      ${(data ?? []).map((s) => html`<tr><td class="mono">${s.id}</td><td>${s.conn.platform} · ${s.conn.server}</td><td><${Badge} value=${s.conn.phase} /></td>
        <td class="actions"><a class="btn sm" href=${`#/live/${s.id}`} data-testid="pick-live">Open</a></td></tr>`)}
    </tbody></table></div>`;
}

function LiveAccount({ id, title }) {
  const [symbols, setSymbols] = useState([]);
  const [chartSymbol, setChartSymbol] = useState('BTCUSD');
  const [bars, setBars] = useState([]);
  const [state, setState] = useState({ quotes: {}, positions: null, orders: null, trades: [], phase: null, socket: 'connecting', frames: 0 });
  const [error, setError] = useState(null);
  const [key, setKey] = useState(null);
  // 404: no such account (a bookmark of a deleted seat, a mistyped id): nothing to stream or retry.
  const [gone, setGone] = useState(false);
  // positions, orders: null until the stream sends a list (P4 sends none before a change, and no ORDERS
  // at all): the page shows /OpenedOrders' until then.
  const live = useRef({ quotes: {}, positions: null, orders: null, trades: [], phase: null, socket: 'connecting', frames: 0, dirty: true });

  const summary = usePoll(async () => {
    if (!key) return undefined;
    return api.get(`/AccountSummary?id=${encodeURIComponent(id)}`, { apiKey: key });
  }, 2000, [id, key]);
  // Positions' current price and profit as the broker has them now: the stream's POSITIONS list
  // changes only when a position does, so its figures are those of the last change. Also the
  // positions and pending orders themselves until the stream lists them (P4: no snapshot, no ORDERS).
  const opened = usePoll(async () => {
    if (!key) return undefined;
    const rows = await api.get(`/OpenedOrders?id=${encodeURIComponent(id)}`, { apiKey: key });
    return Array.isArray(rows) ? rows : [];
  }, 2000, [id, key]);
  const marks = useMemo(() => Object.fromEntries((opened.data ?? []).filter((r) => r.kind === 'position').map((r) => [r.ticket, r])), [opened.data]);

  // The key, the symbol list, then the socket (reopened after a drop).
  useEffect(() => {
    let ws = null;
    let closed = false;
    let retry = null;
    const L = live.current;
    let used = null;
    const open = async (refused) => {
      try {
        const key = (used = await liveKey(id, refused));
        setKey(key);
        const list = await api.get(`/SymbolList?id=${encodeURIComponent(id)}`, { apiKey: key });
        const syms = (Array.isArray(list) ? list : list.symbols ?? []).map((s) => (typeof s === 'string' ? s : s.symbol)).slice(0, 12);
        setSymbols(syms);
        // A server without the default chart symbol: chart its first one (the effect reruns).
        if (syms.length > 0 && !syms.includes(chartSymbol)) { setChartSymbol(syms[0]); return; }
        if (closed) return;
        const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}/v1/stream?id=${encodeURIComponent(id)}&apiKey=${encodeURIComponent(key)}`;
        ws = new WebSocket(url);
        ws.onopen = () => {
          L.socket = 'open';
          L.dirty = true;
          for (const s of syms) ws.send(JSON.stringify({ action: 'subscribe', symbol: s, ...(s === chartSymbol ? { timeframe: 'M1' } : {}) }));
        };
        ws.onmessage = (m) => onFrame(JSON.parse(m.data));
        ws.onclose = (e) => {
          L.socket = `closed (${e.code}${e.reason ? `: ${e.reason}` : ''})`;
          L.dirty = true;
          if (closed) return;
          // 4001: the key was revoked (say, from the Keys page): make a new one.
          retry = setTimeout(() => open(e.code === 4001 ? used : null), 2000);
        };
      } catch (err) {
        if (err.status === 401 && !refused && used) return open(used);
        if (err.code === 'NOT_FOUND') return setGone(true);
        setError(err);
        if (!closed) retry = setTimeout(() => open(null), 5000);
      }
      return undefined;
    };
    const onFrame = (f) => {
      L.frames++;
      switch (f.type) {
        case 'QUOTE': {
          const d = f.data;
          const prev = L.quotes[d.symbol];
          L.quotes = { ...L.quotes, [d.symbol]: { ...d, dir: prev ? Math.sign(d.bid - prev.bid) || prev.dir : 0, n: (prev?.n ?? 0) + 1 } };
          break;
        }
        case 'POSITIONS': L.positions = f.data.positions ?? []; break;
        case 'ORDERS': L.orders = f.data.orders ?? []; break;
        case 'TRADE': L.trades = [f.data, ...L.trades].slice(0, MAX_TRADES); break;
        case 'HEARTBEAT': L.phase = f.data.connection; break;
        case 'CANDLE': {
          const c = f.data;
          if (c.symbol !== chartSymbolRef.current) break;
          setBars((bs) => {
            const bar = { t: c.time, close: c.close, high: c.high, low: c.low };
            if (bs.length && bs[bs.length - 1].t === c.time) return [...bs.slice(0, -1), bar];
            if (bs.length && bs[bs.length - 1].t > c.time) return bs;
            return [...bs, bar].slice(-240);
          });
          break;
        }
        case 'ERROR': setError({ code: f.data.error, message: f.data.message }); break;
        default: break;
      }
      L.dirty = true;
    };
    open(null);
    // Ticks arrive faster than anyone reads: the tables re-render at most 4 times a second.
    const paint = setInterval(() => {
      if (!L.dirty) return;
      L.dirty = false;
      setState({ quotes: L.quotes, positions: L.positions, orders: L.orders, trades: L.trades, phase: L.phase, socket: L.socket, frames: L.frames });
    }, 250);
    return () => { closed = true; clearTimeout(retry); clearInterval(paint); ws?.close(1000); };
  }, [id, chartSymbol]);

  const chartSymbolRef = useRef(chartSymbol);
  chartSymbolRef.current = chartSymbol;

  // Chart history: a gateway session (management key on the connection route), then
  // PriceHistoryV2 with the read-only key: the last 3 hours of M1 bars.
  useEffect(() => {
    let stop = false;
    (async () => {
      try {
        const key = await liveKey(id);
        const { handle } = await api.post('/v1/connect', { brokerAccountId: id });
        const to = new Date();
        const from = new Date(to.getTime() - 3 * 3600_000);
        const q = new URLSearchParams({ handle, symbol: chartSymbol, timeFrame: '1', from: from.toISOString().slice(0, 19) + 'Z', to: to.toISOString().slice(0, 19) + 'Z' });
        // The gateway waits for the broker's history up to its timeoutSeconds (30 by default).
        const rows = await api.get(`/v1/proxy/PriceHistoryV2?${q}`, { apiKey: key, timeoutMs: 40_000 }).catch(async (err) => {
          if (err.code !== 'OPERATION_NOT_ON_PLATFORM') throw err;
          // P4 has no PriceHistoryV2: QuoteHistory, the `count` bars back from `from` on the server's clock.
          const { utcOffsetMinutes } = await api.get(`/ServerTimezone?id=${encodeURIComponent(id)}`, { apiKey: key });
          const serverNow = new Date(Date.now() + utcOffsetMinutes * 60_000).toISOString().slice(0, 19);
          const p4 = new URLSearchParams({ handle, symbol: chartSymbol, timeframe: 'M1', from: serverNow, count: '180' });
          return api.get(`/v1/proxy/QuoteHistory?${p4}`, { apiKey: key, timeoutMs: 40_000 });
        });
        if (stop) return;
        setBars((Array.isArray(rows) ? rows : []).map((r) => ({ t: r.timeSec, close: r.close, high: r.high, low: r.low })));
        setError(null);
      } catch (err) { if (!stop) (err.code === 'NOT_FOUND' ? setGone(true) : setError(err)); }
    })();
    return () => { stop = true; };
  }, [id, chartSymbol]);

  const chartData = useMemo(() => [bars.map((b) => b.t), bars.map((b) => b.close), bars.map((b) => b.high), bars.map((b) => b.low)], [bars]);
  const acc = summary.data;
  const quotes = symbols.map((s) => state.quotes[s]).filter(Boolean);
  const rows = opened.data ?? [];
  const positions = state.positions ?? rows.filter((r) => r.kind === 'position');
  const orders = state.orders ?? rows.filter((r) => r.kind === 'order').map((o) => ({ ...o, price: o.openPrice, timeSetupUtc: o.openTime }));
  if (gone) {
    return html`<${Top} title=${`${title} · ${short(id)}`} />
      <div class="panel" data-testid="live-gone"><h2>No such account</h2>
        <p>There is no account <span class="mono select-all wrap-any">${id}</span> (its seat deleted, or the address mistyped).</p>
        <a class="btn sm" href="#/live">Choose an account</a></div>`;
  }
  return html`
    <${Top} title=${`${title} · ${short(id)}`} at=${summary.at} error=${summary.error}>
      <span>stream <${Badge} value=${state.socket === 'open' ? 'connected' : state.socket} tone=${state.socket === 'open' ? 'ok' : 'warn'} /></span>
      <span>broker <${Badge} value=${state.phase ?? (acc?.synced ? 'connected' : acc ? 'reconnecting' : null)} /></span>
    </${Top}>
    <${Err} error=${error ?? summary.error} />
    <div class="grid g4">
      <div class="panel stat"><div class="l">Balance</div><div class="v" data-testid="balance">${acc ? acc.balance.toFixed(2) : '—'}</div><div class="s">${acc?.currency ?? ''} · leverage 1:${acc?.leverage ?? '—'}</div></div>
      <div class="panel stat"><div class="l">Equity</div><div class="v">${acc ? acc.equity.toFixed(2) : '—'}</div><div class="s">floating ${acc ? acc.profit.toFixed(2) : '—'}</div></div>
      <div class="panel stat"><div class="l">Margin</div><div class="v">${acc ? acc.margin.toFixed(2) : '—'}</div><div class="s">free ${acc ? acc.freeMargin.toFixed(2) : '—'}${acc?.marginLevel ? ` · level ${acc.marginLevel.toFixed(0)}%` : ''}</div></div>
      <div class="panel stat"><div class="l">Stream</div><div class="v">${state.frames}</div><div class="s">frames · read-only scoped key</div></div>
    </div>
    <div class="grid g3">
      <div class="panel span2">
        <h2>${chartSymbol} · M1 <span class="tabs">${symbols.map((s) => html`<button class=${`sm${s === chartSymbol ? ' on' : ''}`} onClick=${() => { setBars([]); setChartSymbol(s); }}>${s}</button>`)}</span></h2>
        <${TimeChart} key=${chartSymbol} testid="chart" xLabel="server time" series=${PRICE_SERIES} data=${chartData} />
      </div>
      <div class="panel">
        <h2>Quotes</h2>
        <table class="dense" data-testid="quotes"><thead><tr><th>symbol</th><th class="num">bid</th><th class="num">ask</th><th class="num spread">spread</th><th class="num">UTC</th></tr></thead><tbody>
          ${quotes.length === 0 ? html`<tr><td colspan="5" class="empty">Waiting for quotes… (forex is closed at the weekend; BTCUSD trades around the clock)</td></tr>` : null}
          ${quotes.map((q) => {
            const dg = Math.max(digitsOf(q.bid), digitsOf(q.ask));
            const t = quoteTime(q.timeUtc, Date.now());
            return html`<tr key=${q.symbol} data-testid="quote-row" data-symbol=${q.symbol} class=${t.stale ? 'stale' : ''} title=${t.title}>
              <td>${q.symbol}</td>
              <td class=${`num ${q.dir > 0 ? 'up' : q.dir < 0 ? 'down' : ''}`} data-testid="bid">${q.bid.toFixed(dg)}</td>
              <td class=${`num ${q.dir > 0 ? 'up' : q.dir < 0 ? 'down' : ''}`}>${q.ask.toFixed(dg)}</td>
              <td class="num spread">${(q.ask - q.bid).toFixed(dg)}</td>
              <td class="num mono small" data-testid="quote-time">${t.text}</td></tr>`;
          })}
        </tbody></table>
      </div>
    </div>
    <div class="grid g2">
      <div class="panel">
        <h2>Positions <span class="muted small">${positions.length}</span></h2>
        <table data-testid="positions"><thead><tr><th>ticket</th><th>symbol</th><th>type</th><th class="num">volume</th><th class="num">open</th><th class="num">current</th><th class="num">profit</th></tr></thead><tbody>
          ${positions.length === 0 ? html`<tr><td colspan="7" class="empty">No open positions.</td></tr>` : null}
          ${positions.map((s) => ({ ...s, ...pick(marks[s.ticket], ['currentPrice', 'profit']) })).map((p) => html`<tr key=${p.ticket} data-testid="position-row"><td class="mono">${p.ticket}</td><td>${p.symbol}</td><td>${p.type}</td><td class="num">${p.volume}</td><td class="num">${p.openPrice}</td><td class="num" data-testid="position-current">${p.currentPrice}</td><td class=${`num ${p.profit >= 0 ? 'up' : 'down'}`}>${Number(p.profit).toFixed(2)}</td></tr>`)}
        </tbody></table>
      </div>
      <div class="panel">
        <h2>Pending orders <span class="muted small">${orders.length}</span></h2>
        <table data-testid="orders"><thead><tr><th>ticket</th><th>symbol</th><th>type</th><th class="num">volume</th><th class="num">price</th><th>placed (UTC)</th></tr></thead><tbody>
          ${orders.length === 0 ? html`<tr><td colspan="6" class="empty">No pending orders.</td></tr>` : null}
          ${orders.map((o) => html`<tr key=${o.ticket}><td class="mono">${o.ticket}</td><td>${o.symbol}</td><td>${o.type}</td><td class="num">${o.volume}</td><td class="num">${o.price}</td><td class="mono">${utc(o.timeSetupUtc)}</td></tr>`)}
        </tbody></table>
      </div>
    </div>
    <div class="panel">
      <h2>Trades <span class="muted small">deals since this view opened, newest first</span></h2>
      <div class="scroll"><table data-testid="trades"><thead><tr><th>time (UTC)</th><th>deal</th><th>position</th><th>symbol</th><th>type</th><th>entry</th><th class="num">volume</th><th class="num">price</th><th class="num">profit</th><th>comment</th></tr></thead><tbody>
        ${state.trades.length === 0 ? html`<tr><td colspan="10" class="empty">No trades yet.</td></tr>` : null}
        ${state.trades.map((t) => html`<tr key=${t.ticket} data-testid="trade-row"><td class="mono">${utc(t.timeUtc)}</td><td class="mono">${t.ticket}</td><td class="mono">${t.position}</td><td>${t.symbol}</td><td>${t.type}</td><td>${t.entry}</td><td class="num">${t.volume}</td><td class="num">${t.price}</td><td class=${`num ${t.profit >= 0 ? 'up' : 'down'}`}>${Number(t.profit).toFixed(2)}</td><td>${t.comment}</td></tr>`)}
      </tbody></table></div>
    </div>`;
}

export function Live({ arg, title }) {
  if (!session.key) return null;
  // Another account (#/live/<id>): a new view, its stream and key its own.
  return arg ? html`<${LiveAccount} key=${arg} id=${arg} title=${title} />` : html`<${Top} title=${title} /><${Picker} />`;
}

/** `keys` of `o` that it has (none when there is no `o`). */
function pick(o, keys) {
  return o ? Object.fromEntries(keys.filter((k) => o[k] !== undefined).map((k) => [k, o[k]])) : {};
}

/** A quote's time as the table shows it: hh:mm:ss (UTC) today, with the weekday when the last tick
 *  was on another day (forex on a Sunday shows Friday's); older than a minute, `stale` greys the row
 *  and `title` says how old (its market may be closed). */
export function quoteTime(timeUtc, now) {
  const at = Date.parse(timeUtc);
  const hms = timeUtc.slice(11, 19);
  const otherDay = timeUtc.slice(0, 10) !== new Date(now).toISOString().slice(0, 10);
  const text = otherDay ? `${new Date(at).toUTCString().slice(0, 3)} ${hms}` : hms;
  const ageMin = Math.floor((now - at) / 60_000);
  if (!(ageMin >= 1)) return { text, stale: false, title: '' };
  const age = ageMin >= 60 ? `${Math.floor(ageMin / 60)} h ${ageMin % 60} min` : `${ageMin} min`;
  return { text, stale: true, title: `last tick ${timeUtc.slice(0, 10)} ${hms} UTC, ${age} ago: its market may be closed` };
}
