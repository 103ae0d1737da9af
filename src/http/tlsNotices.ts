// What the start (and each SIGHUP reload) says about TLS: plain HTTP where other machines reach it,
// and when the certificate in use expires (docs/operations.md#tls).
import { isIP } from 'node:net';
import type { Logger } from '../log.js';
import type { Listener } from './listener.js';

/** Plain HTTP: an info line on loopback, a warning where keys would cross the network in clear. */
export function logPlainHttp(log: Logger, listener: Listener, host: string): void {
  if (listener.secure) return;
  if (isLoopback(host)) log.info('plain HTTP and WS: no TLS_CERT_FILE / TLS_KEY_FILE configured (docs/operations.md#tls)');
  else log.warn('plain HTTP and WS on an address other machines reach: API and management keys cross the network in clear; set TLS_CERT_FILE / TLS_KEY_FILE or serve through a TLS proxy (docs/operations.md#tls)', { host });
}

/** 127.0.0.0/8, ::1, localhost: only this machine reaches it. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

/** When the certificate in use expires: a warning within 14 days, an error once it has (clients refuse it). */
export function logCertificateExpiry(log: Logger, listener: Listener, now: number): void {
  const expiresAt = listener.certificateExpiresAt;
  if (expiresAt === undefined) return;
  const notAfter = new Date(expiresAt).toISOString();
  const daysLeft = Math.floor((expiresAt - now) / 8_640_000) / 10;
  if (expiresAt <= now) log.error('TLS certificate has expired: clients refuse it; renew it, then reload (SIGHUP)', { notAfter });
  else if (daysLeft < 14) log.warn('TLS certificate expires soon', { notAfter, daysLeft });
  else log.info('TLS certificate', { notAfter, daysLeft });
}
