// tagw/client: the TypeScript SDK of the gateway (docs/client.md). Runs in Node 20+ and browsers
// on the platform fetch and WebSocket; nothing from node:, no dependency.
export { TagwClient, type AccountApi, type TagwClientOptions, type TradeAnswer } from './client.js';
export { TagwError, IdempotencyUncertainError, isTagwError, type TagwErrorCode, type ClientErrorCode, type ErrorCode, type RejectReason } from './errors.js';
export { GatewaySession, GatewaySocketClient, type ProxyApi, type GatewaySocketOptions } from './session.js';
export { StreamSubscription, type StreamOptions, type StreamEvents } from './stream.js';
export { StreamCursor, formatSince, parseSince, type StreamPosition } from './cursor.js';
export { backoffDelay, shouldRetry, type BackoffOptions } from './backoff.js';
export { newClientOrderId } from './ids.js';
export type { CallOptions, RetryOptions, CallResult } from './http.js';
export type { WebSocketConstructor, WebSocketLike, SocketState } from './socket.js';
export type * from './frames.js';
export type * from './types.js';
