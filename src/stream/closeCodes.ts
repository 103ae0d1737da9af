// WebSocket close codes of both sockets, /v1/stream and /ws, in one table so a code means one thing
// wherever a client reads it (4000-4999 is the application range). docs/stream.md and
// docs/gateway.md list them for clients.

export const SOCKET_CLOSE = {
  /** Server shutting down; reconnect to another instance or later. Both sockets. */
  GOING_AWAY: { code: 1001, reason: 'server shutting down' },
  /** Unexpected fault on our side. Both sockets. */
  INTERNAL: { code: 1011, reason: 'internal error' },
  /** The API key the socket was opened with has been revoked. Both sockets. */
  KEY_REVOKED: { code: 4001, reason: 'API key revoked' },
  /** The client reads too slowly: a frame that must not be dropped (on /v1/stream an account event,
   *  on /ws any frame) did not fit under the backpressure limit. Reconnect (and on /v1/stream resume). Both sockets. */
  BACKPRESSURE: { code: 4008, reason: 'client too slow: over the backpressure limit; reconnect and resume' },
  /** /v1/stream: the account runtime could not be reached or the account disappeared. */
  ACCOUNT_UNAVAILABLE: { code: 4010, reason: 'account unavailable' },
  /** The thread of the account's shard died (crash recovery), sent when it dies, not once a new one is
   *  up. /v1/stream: reconnect, resubscribe and resync from the snapshots (a new epoch); /ws: reconnect
   *  with the same handle (the session survives; its subscriptions are placed again when the shard is
   *  up). Both sockets. */
  RUNTIME_RESTARTED: { code: 4011, reason: 'account runtime restarted; reconnect and resubscribe' },
  /** /v1/stream: the account was bound (/ConnectEx id=) to another broker login (its account stream
   *  begins a new epoch); on another server also another market, clock, maybe platform. Reconnect
   *  and resubscribe. */
  ACCOUNT_REBOUND: { code: 4012, reason: 'account bound to another broker login; reconnect and resubscribe' },
  /** /v1/stream: after a restart or an outage the broker's deal history could not be read, or on a
   *  full disk the account's frames waiting to be stored passed STREAM_HISTORY_HELD_MAX_BYTES, so deals
   *  may be missing from the account stream: a new epoch began. Reconnect: the resume answers
   *  recovered:false, then fresh snapshots; read /OrderHistory for the deals. */
  STREAM_GAP: { code: 4014, reason: 'account events may have been missed; reconnect and resync' },
  /** /ws: the gateway session ended (Disconnect, or its shard ended it); the handle is gone. */
  SESSION_ENDED: { code: 4013, reason: 'session disconnected' },
} as const;
export type SocketCloseName = keyof typeof SOCKET_CLOSE;

/** The largest client message either socket reads (uWS maxPayloadLength): anything up to it is
 *  answered (on /v1/stream acted on or an ERROR frame, on /ws PONG or ERROR); a larger one fails the
 *  connection (RFC 6455), and uWS sends no close frame (the client sees 1006). Above what a valid
 *  /v1/stream message can take (256 symbols of 64 characters pass 16 KiB). */
export const CLIENT_MESSAGE_MAX_BYTES = 64 * 1024;
