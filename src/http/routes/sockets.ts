// The two WebSocket endpoints in the route table: a plain GET (not an upgrade) answers 400 instead
// of falling through to the 404 of unknown paths, and the OpenAPI document lists them. The upgrades
// themselves are uWS ws() handlers (src/stream/hub.ts, src/stream/gatewaySocket.ts), which see every
// upgrade first; uWS passes a GET without one on to these routes. The paths are defined here, in
// the route table, and the stream edge above takes them from it.
import { apiError } from '../../errors.js';
import { defineRoute, type AnyRoute } from '../route.js';

/** The account stream (src/stream/hub.ts serves it). */
export const STREAM_PATH = '/v1/stream';
/** The pushes of a gateway session (src/stream/gatewaySocket.ts serves it). */
export const GATEWAY_SOCKET_PATH = '/ws';

export function socketRoutes(): AnyRoute[] {
  const notUpgrade = (path: string) => () => {
    throw apiError('BAD_REQUEST', `${path} is a WebSocket endpoint: send an upgrade request (Connection: Upgrade, Upgrade: websocket)`);
  };
  return [
    defineRoute({
      method: 'get', path: STREAM_PATH, family: 'stream', auth: 'none', tags: ['stream'], successStatus: 101,
      summary: 'WebSocket: quotes, candles, positions, orders, trades and heartbeats of an account (SPEC §6)',
      description: 'Upgrade with ?id=<account>&apiKey=<key> (or x-api-key), optional heartbeat=0, optional since=<epoch>:<seq> to resume the account stream after the last POSITIONS/ORDERS/TRADE frame received (the first frame is then RESUMED {recovered, replayed}: recovered:true is followed by exactly the missed frames in order, recovered:false by fresh snapshots; since=message takes the same request as the first client message). Account frames carry seq (per account) and epoch; QUOTE/CANDLE carry their topic seq and the market epoch; control frames carry neither. Refusals are checked before the upgrade and answer the statuses listed (docs/stream.md); a malformed since, like any bad parameter, is 400; a parameter it does not take (heartBeat, Since) is 400 INVALID_PARAMETER, never ignored. A GET that is not an upgrade is 400.',
      errors: ['BAD_REQUEST', 'INVALID_PARAMETER', 'ACCOUNT_ID_REQUIRED', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'NO_SUBSCRIPTION', 'ACCOUNT_SCOPE', 'NOT_FOUND', 'AUTH_THROTTLED', 'NOT_CONNECTED', 'SERVICE_UNAVAILABLE'],
      handler: notUpgrade(STREAM_PATH),
    }),
    defineRoute({
      method: 'get', path: GATEWAY_SOCKET_PATH, family: 'gateway', auth: 'none', tags: ['gateway'], successStatus: 101,
      summary: 'WebSocket: pushes of a gateway session (?handle=), see docs/gateway.md',
      description: 'Upgrade with ?handle=<session handle> and the API key (x-api-key or apiKey=); any other parameter is 400 INVALID_PARAMETER. A GET that is not an upgrade is 400.',
      errors: ['BAD_REQUEST', 'INVALID_PARAMETER', 'API_KEY_REQUIRED', 'INVALID_API_KEY', 'SESSION_NOT_FOUND', 'ACCOUNT_SCOPE', 'AUTH_THROTTLED', 'SERVICE_UNAVAILABLE'],
      handler: notUpgrade(GATEWAY_SOCKET_PATH),
    }),
  ];
}
