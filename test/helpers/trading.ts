// A bot's view of a gateway process: a key and a bound simulator account, and /OrderSend with a
// clientOrderId that reports a refused connection as a value (the process may be going away).

export async function bindAccount(url: string, managementKey: string, user = 'bot'): Promise<{ key: string; id: string }> {
  const post = async (path: string, headers: Record<string, string>, body: unknown) => {
    const r = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return (await r.json()) as Record<string, string>;
  };
  const { key } = await post('/v1/keys', { authorization: `Bearer ${managementKey}` }, { label: 'bot' });
  const { id } = await post('/ConnectEx', { 'x-api-key': key! }, { user, password: 'pw', server: 'Sim-P5-Demo' });
  return { key: key!, id: id! };
}

export interface Sent { status: number | 'refused'; ticket?: number; replay: boolean }

export async function orderSend(url: string, key: string, id: string, clientOrderId: string): Promise<Sent> {
  try {
    const r = await fetch(`${url}/OrderSend?id=${id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=${clientOrderId}`, { headers: { 'x-api-key': key } });
    const body = (await r.json()) as { ticket?: number };
    return { status: r.status, replay: r.headers.get('idempotent-replay') === 'true', ...(body.ticket ? { ticket: body.ticket } : {}) };
  } catch {
    return { status: 'refused', replay: false }; // connection refused or closed: not accepted
  }
}

export async function openedTickets(url: string, key: string, id: string): Promise<number[]> {
  const opened = (await (await fetch(`${url}/OpenedOrders?id=${id}`, { headers: { 'x-api-key': key } })).json()) as Array<{ ticket: number }>;
  return opened.map((o) => o.ticket).sort((x, y) => x - y);
}
