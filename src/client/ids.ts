// Identifiers the SDK makes: clientOrderIds (so every order it sends can be retried safely) and
// request ids. Uses the platform's Web Crypto (Node 20+ and browsers), nothing from node:.

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz';

function randomChars(n: number): string {
  const bytes = new Uint8Array(n);
  globalThis.crypto.getRandomValues(bytes);
  let s = '';
  for (const b of bytes) s += ALPHABET[b % 36];
  return s;
}

/** A clientOrderId as SPEC §2 allows (1-64 of A-Z a-z 0-9 _ . : -): `sdk-<ms>-<16 random>`, 29
 *  characters (the time is 8 base-36 digits until 2059), about 82 random bits: two bots never pick the same one. */
export function newClientOrderId(nowMs: number = Date.now()): string {
  return `sdk-${nowMs.toString(36)}-${randomChars(16)}`;
}

export const CLIENT_ORDER_ID_RE = /^[A-Za-z0-9_.:-]{1,64}$/;

export function newRequestId(): string {
  return `req-${randomChars(20)}`;
}
