// The cluster scenarios' checker (issue 20): every request a client sent, with the node it reached
// and the answer it got, against what the broker executed. Pure: the scenarios collect both sides
// (the requests as they go, the broker's order history from the simulator at the end).

/** One HTTP attempt of an order: a client retrying the same clientOrderId makes several. */
export interface Attempt {
  clientOrderId: string;
  /** The node the request was sent to (its NODE_ID). */
  node: string;
  /** The HTTP status, or 'refused' when no answer came (connection refused, reset, node killed). */
  status: number | 'refused';
  /** The answer's ticket, when it had one. */
  ticket?: number;
}

/** An order in the broker's history, with the clientOrderId it was sent under (the scenarios put it
 *  in the order's comment, which the broker keeps). */
export interface BrokerOrder {
  ticket: number;
  clientOrderId: string;
}

export interface LedgerFindings {
  /** Ids the broker executed more than once, with their tickets. */
  doubled: Array<{ clientOrderId: string; tickets: number[] }>;
  /** Ids that got a 200 but are not at the broker. */
  missing: string[];
  /** A 200 whose ticket is not the broker's order for that id (a replay answering another order). */
  wrongTicket: Array<{ clientOrderId: string; answered: number; broker: number }>;
  /** Orders at the broker under an id no client sent. */
  unknown: BrokerOrder[];
}

export function checkLedger(attempts: readonly Attempt[], broker: readonly BrokerOrder[]): LedgerFindings {
  const atBroker = new Map<string, number[]>();
  for (const o of broker) atBroker.set(o.clientOrderId, [...(atBroker.get(o.clientOrderId) ?? []), o.ticket]);
  const sent = new Set(attempts.map((a) => a.clientOrderId));
  const doubled = [...atBroker].filter(([, t]) => t.length > 1).map(([clientOrderId, tickets]) => ({ clientOrderId, tickets: [...tickets].sort((x, y) => x - y) }));
  const missing = new Set<string>();
  const wrongTicket: LedgerFindings['wrongTicket'] = [];
  for (const a of attempts) {
    if (a.status !== 200) continue;
    const tickets = atBroker.get(a.clientOrderId);
    if (!tickets) missing.add(a.clientOrderId);
    else if (a.ticket !== undefined && tickets.length === 1 && tickets[0] !== a.ticket) {
      wrongTicket.push({ clientOrderId: a.clientOrderId, answered: a.ticket, broker: tickets[0]! });
    }
  }
  const unknown = broker.filter((o) => !sent.has(o.clientOrderId));
  return { doubled, missing: [...missing].sort(), wrongTicket, unknown };
}

/** Throws, naming every finding, unless the history is clean: each id at most once at the broker,
 *  every 200 there under the ticket it answered, nothing at the broker that no client sent. */
export function assertLedger(attempts: readonly Attempt[], broker: readonly BrokerOrder[]): void {
  const f = checkLedger(attempts, broker);
  if (f.doubled.length + f.missing.length + f.wrongTicket.length + f.unknown.length === 0) return;
  const byId = (id: string) => attempts.filter((a) => a.clientOrderId === id).map((a) => `${a.node}:${a.status}${a.ticket ? `#${a.ticket}` : ''}`).join(' ');
  const lines = [
    ...f.doubled.map((d) => `doubled ${d.clientOrderId}: tickets ${d.tickets.join(',')} (attempts ${byId(d.clientOrderId)})`),
    ...f.missing.map((id) => `missing ${id}: answered 200 but not at the broker (attempts ${byId(id)})`),
    ...f.wrongTicket.map((w) => `wrong ticket ${w.clientOrderId}: answered #${w.answered}, the broker has #${w.broker}`),
    ...f.unknown.map((o) => `unknown #${o.ticket} at the broker under '${o.clientOrderId}', never sent`),
  ];
  throw new Error(`order ledger: ${lines.length} finding(s) over ${attempts.length} attempts and ${broker.length} broker orders\n${lines.join('\n')}`);
}
