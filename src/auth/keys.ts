// Key format: tagw_<kind>_<id>_<secret>. The recognisable prefix lets secret scanners flag leaked
// keys; the id finds the row without scanning; only SHA-256(secret) is stored, compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export type KeyKind = 'management' | 'api';
const KIND_TAG: Record<KeyKind, string> = { management: 'm', api: 'k' };
const KEY_RE = /^tagw_([mk])_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$/;

export interface ParsedKey { kind: KeyKind; id: string; secret: string }

export function generateKey(kind: KeyKind): { id: string; secret: string; value: string } {
  const id = randomBytes(8).toString('hex');
  const secret = randomBytes(32).toString('base64url');
  return { id, secret, value: `tagw_${KIND_TAG[kind]}_${id}_${secret}` };
}

export function parseKey(value: string): ParsedKey | undefined {
  const m = KEY_RE.exec(value);
  if (!m) return undefined;
  return { kind: m[1] === 'm' ? 'management' : 'api', id: m[2]!, secret: m[3]! };
}

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

export function secretMatches(secret: string, storedHash: string): boolean {
  const a = Buffer.from(hashSecret(secret), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
