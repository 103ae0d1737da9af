// The overview's Cluster panel (cluster mode only: /v1/status `cluster` is null on a single node):
// every node PostgreSQL knows of with the NATS link, takeovers and calls between nodes its last
// heartbeat reported, the accounts without owner, whether this node stepped down (cut off from NATS
// while others reach it), and this node's lease changes and calls since it started, now (as
// /metrics, tagw_cluster_*).
import { html } from './lib.js';
import { Badge, duration } from './ui.js';

function heartbeat(ageMs) {
  return ageMs < 60_000 ? `${(ageMs / 1000).toFixed(1)} s ago` : `${duration(Math.round(ageMs / 1000))} ago`;
}

/** A live node's NATS link as its last heartbeat said; a down node's is stale, and one may not say (null). */
const nats = (n) => (n.live && typeof n.natsUp === 'boolean' ? html`<${Badge} value=${n.natsUp ? 'up' : 'down'} />` : '—');

/** A node's counter as its last heartbeat said ('—': it did not say). Wide screens only: at phone
 *  width the table keeps the columns that say whether the node serves. */
const Count = ({ value, testid }) => html`<td class="num wide-only" data-testid=${testid}>${value ?? '—'}</td>`;

const Row = ({ label, value, testid }) => html`<tr><td>${label}</td><td class="num" data-testid=${testid}>${value ?? '—'}</td></tr>`;

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
          <table class="narrow-dense" data-testid="cluster-nodes"><thead><tr><th>node</th><th>state</th><th>NATS</th><th class="num">accounts</th><th class="num">heartbeat</th>
            <th class="num wide-only" title="accounts it took over since it started">takeovers</th><th class="num wide-only" title="calls it forwarded to their owner">forwarded</th>
            <th class="num wide-only" title="calls it served for other nodes">served</th></tr></thead><tbody>
            ${c.nodes.map((n) => html`<tr data-testid="cluster-node" data-node=${n.nodeId}>
              <td class="node-id">${n.nodeId}${n.nodeId === c.nodeId ? html` <span class="badge b-info" data-testid="this-node">this node</span>` : null}</td>
              <td><${Badge} value=${n.live ? 'live' : 'down'} tone=${n.live ? 'ok' : 'bad'} /></td>
              <td data-testid="node-nats">${nats(n)}</td>
              <td class="num">${n.accounts}</td><td class="num nowrap">${heartbeat(n.heartbeatAgeMs)}</td>
              <${Count} value=${n.leases?.takeovers} testid="node-takeovers" /><${Count} value=${n.calls?.forwarded} testid="node-forwarded" />
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
          <${Row} label="takeovers" value=${l.takeovers} testid="takeovers" />
          <${Row} label="calls forwarded" value=${k.forwarded} testid="calls-forwarded" />
          <${Row} label="served for other nodes" value=${k.served} testid="calls-served" />
          <${Row} label="unavailable (503)" value=${k.unavailable} testid="calls-unavailable" />
        </tbody></table>
      </div>
    </div>`;
}
