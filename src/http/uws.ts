// uWebSockets.js loads through the @trufflesuite build, which silently falls back to a slow
// pure-JS shim when its native binary cannot load. A gateway for latency-sensitive bots must not
// run on that by accident: detect it and refuse unless the operator allowed it.
import uws from 'uWebSockets.js';
import type { Logger } from '../log.js';

export function uwsIsNative(): boolean {
  return /\[native code\]/.test(Function.prototype.toString.call(uws.App));
}

export class UwsFallbackError extends Error {}

export function loadUws(allowFallback: boolean, log: Logger): typeof uws {
  const native = uwsIsNative();
  if (!native && !allowFallback) {
    throw new UwsFallbackError(
      'uWebSockets.js native binary did not load (JS fallback active); refusing to start. Set ALLOW_UWS_FALLBACK=1 to run on the slow fallback anyway.',
    );
  }
  log.info('http engine', { engine: native ? 'uWebSockets.js native' : 'uWebSockets.js JS fallback (slow)' });
  return uws;
}
