// The overview's Cluster panel (cluster mode only: /v1/status `cluster` is null on a single node):
// every node PostgreSQL knows of with the NATS link, takeovers (by how the lease ended: expired, a
// holder that died; handed over, an orderly move) and calls between nodes its last heartbeat reported, the accounts without owner, whether this node stepped down (cut off from NATS
// while others reach it), and this node's lease changes and calls since it started, now (as
// /metrics, tagw_cluster_*); and the live nodes' quote sessions (QUOTE_LOGINS_FILE), shown when any
// node has one.
import { html } from './lib.js';
import { ago, Badge, duration } from './ui.js';

function heartbeat(ageMs) {
  return ageMs < 60_000 ? `${(ageMs / 1000).toFixed(1)} s ago` : `${duration(Math.round(ageMs / 1000))} ago`;
}

/** A live node's NATS link as its last heartbeat said; a down node's is stale, and one may not say (null). */
const nats = (n) => (n.live && typeof n.natsUp === 'boolean' ? html`<${Badge} value=${n.natsUp ? 'up' : 'down'} />` : '—');

/** A node's counter as its last heartbeat said ('—': it did not say). Wide screens only: at phone
 *  width the table keeps the columns that say whether the node serves. */
const Count = ({ value, testid }) => html`<td class="num wide-only" data-testid=${testid}>${value ?? '—'}</td>`;

const Row = ({ label, value, testid }) => html`<tr><td>${label}</td><td class="num" data-testid=${testid}>${value ?? '—'}</td></tr>`;

/** Takeovers of leases that ran out unreleased (their holder died or could not renew): what an
 *  operator must notice, in the warning tone once there is one; handovers are the normal moves. */
const expiredText = (n) => (n > 0 ? html`<span class="badge b-warn">${n}</span>` : n);

/** A node's takeovers as its last heartbeat said, by reason; from an older build that does not say
 *  them apart, the total across both columns ('—': it said none). */
function TakeoverCells({ leases: l }) {
  if (l && typeof l.takeoversExpired === 'number' && typeof l.takeoversHandover === 'number') {
    return html`<td class="num wide-only" data-testid="node-takeovers-expired" data-takeovers=${l.takeovers}>${expiredText(l.takeoversExpired)}</td>
      <td class="num wide-only" data-testid="node-takeovers-handover">${l.takeoversHandover}</td>`;
  }
  if (!l) return html`<td class="num wide-only" colspan="2" data-testid="node-takeovers">—</td>`;
  return html`<td class="num wide-only" colspan="2" data-testid="node-takeovers" title="a node of an older build: its takeovers, not told apart">${l.takeovers} <span class="muted small">in all</span></td>`;
}

/** This node's takeovers: the total, then by reason (absent from an older build: the total alone). */
function TakeoverRows({ l }) {
  const split = typeof l.takeoversExpired === 'number' && typeof l.takeoversHandover === 'number';
  return html`<${Row} label="takeovers" value=${l.takeovers} testid="takeovers" />
    ${split ? html`<tr class="sub"><td title="their lease ran out unreleased: its holder died (a crash, SIGKILL) or could not renew it">of which expired</td>
        <td class="num" data-testid="takeovers-expired">${expiredText(l.takeoversExpired)}</td></tr>
      <tr class="sub"><td title="their holder released the lease: a rolling restart (SIGTERM), a rebalance, a node stepping down">of which handed over</td>
        <td class="num" data-testid="takeovers-handover">${l.takeoversHandover}</td></tr>` : null}`;
}

/** Every live node's quote sessions: this node's as read now, the others' as their last heartbeat
 *  said (a down node's are stale: not shown; an older build's: none). */
function quoteRows(c) {
  return c.nodes.filter((n) => n.live)
    .flatMap((n) => ((n.nodeId === c.nodeId ? c.quoteSessions ?? n.quoteSessions : n.quoteSessions) ?? []).map((q) => ({ node: n.nodeId, ...q })));
}

const symbolsText = (s) => (s.length === 0 ? '—' : s.length <= 3 ? s.join(', ') : `${s.slice(0, 3).join(', ')} +${s.length - 3}`);

/** A node's market-data sessions: state and since when, symbols, quotes received, and whether the
 *  node takes the server's quotes from the session alone or from the owners' relay too (the fallback).
 *  At phone width: the columns that say whether each serves (login, since and quotes on wide screens). */
function QuoteSessions({ c }) {
  const rows = quoteRows(c);
  if (rows.length === 0) return null;
  return html`
    <p class="small muted qs-head">Quote sessions: a node's market-data login of a broker server it runs no account of (QUOTE_LOGINS_FILE); the owners' relay is the fallback.</p>
    <div class="scroll-x">
      <table class="narrow-dense" data-testid="quote-sessions"><thead><tr><th>node</th><th>server</th><th class="wide-only">login</th><th>state</th>
        <th class="wide-only">since</th><th>symbols</th><th class="num wide-only" title="quotes of followed symbols received since the node's shard started">quotes</th>
        <th title="session: from the session alone; relay: the owners' relay too, while the session connects, is down, refused or behind">from</th></tr></thead><tbody>
        ${rows.map((q) => html`<tr data-testid="quote-session" data-node=${q.node} data-server=${q.server}>
          <td class="node-id">${q.node}${q.node === c.nodeId ? html` <span class="badge b-info wide-only">this node</span>` : null}</td>
          <td class="wrap-any">${q.server}</td><td class="wide-only">${q.login}</td>
          <td data-testid="qs-state"><${Badge} value=${q.state} /></td>
          <td class="wide-only nowrap" title=${q.since}>${ago(q.since)}</td>
          <td data-testid="qs-symbols" title=${q.symbols.join(', ')}>${symbolsText(q.symbols)}</td>
          <td class="num wide-only" data-testid="qs-quotes">${q.quotes}</td>
          <td data-testid="qs-from"><${Badge} value=${q.quotesFrom} tone=${q.quotesFrom === 'session' ? 'ok' : 'warn'} /></td></tr>`)}
      </tbody></table>
    </div>`;
}

export function ClusterPanel({ cluster: c }) {
  if (!c) return null;
  const live = c.nodes.filter((n) => n.live).length;
  const l = c.leases ?? {};
  const k = c.calls ?? {};
  return html`
    <div class="panel" data-testid="cluster">
      <h2>Cluster <span class="small muted cluster-sum">${live} of ${c.nodes.length} nodes live · NATS <${Badge} value=${c.natsUp ? 'up' : 'down'} /></span></h2>
      ${c.steppedDown ? html`<p class="stepped-down" data-testid="stepped-down"><${Badge} value="stepped down" tone="bad" /> cut off from NATS, its accounts handed over until its link is back</p>` : null}
      <div class="grid g3">
        <div class="span2 scroll-x">
          <table class="narrow-dense" data-testid="cluster-nodes"><thead><tr><th rowspan="2">node</th><th rowspan="2">state</th><th rowspan="2">NATS</th><th class="num" rowspan="2">accounts</th><th class="num" rowspan="2">heartbeat</th>
            <th class="num wide-only takeovers-head" colspan="2" title="accounts it took over since it started, by how their lease ended">takeovers</th>
            <th class="num wide-only" rowspan="2" title="calls it forwarded to their owner">forwarded</th><th class="num wide-only" rowspan="2" title="calls it served for other nodes">served</th></tr>
            <tr><th class="num wide-only" title="the lease ran out unreleased: its holder died (a crash, SIGKILL) or could not renew it">expired</th>
            <th class="num wide-only" title="its holder released the lease: a rolling restart (SIGTERM), a rebalance, a node stepping down">handover</th></tr></thead><tbody>
            ${c.nodes.map((n) => html`<tr data-testid="cluster-node" data-node=${n.nodeId}>
              <td class="node-id">${n.nodeId}${n.nodeId === c.nodeId ? html` <span class="badge b-info" data-testid="this-node">this node</span>` : null}</td>
              <td><${Badge} value=${n.live ? 'live' : 'down'} tone=${n.live ? 'ok' : 'bad'} /></td>
              <td data-testid="node-nats">${nats(n)}</td>
              <td class="num">${n.accounts}</td><td class="num nowrap">${heartbeat(n.heartbeatAgeMs)}</td>
              <${TakeoverCells} leases=${n.leases} /><${Count} value=${n.calls?.forwarded} testid="node-forwarded" />
              <${Count} value=${n.calls?.served} testid="node-served" /></tr>`)}
          </tbody></table>
          <p class="small muted">
            ${c.unowned > 0 ? html`<${Badge} value=${`${c.unowned} without owner`} tone="warn" /> a takeover in progress: their calls wait for the new owner. `
              : 'Every account has an owner. '}
            This node owns ${c.ownedHere}.
          </p>
        </div>
        <table data-testid="cluster-this-node"><thead><tr><th colspan="2">this node since it started</th></tr></thead><tbody>
          <${Row} label="leases acquired" value=${l.acquired} testid="leases-acquired" />
          <${Row} label="handed over" value=${l.handedOver} testid="leases-handed-over" />
          <${Row} label="lost" value=${l.lost} testid="leases-lost" />
          <${TakeoverRows} l=${l} />
          <${Row} label="calls forwarded" value=${k.forwarded} testid="calls-forwarded" />
          <${Row} label="served for other nodes" value=${k.served} testid="calls-served" />
          <${Row} label="unavailable (503)" value=${k.unavailable} testid="calls-unavailable" />
        </tbody></table>
      </div>
      <${QuoteSessions} c=${c} />
    </div>`;
}
