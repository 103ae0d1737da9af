// AES-256-GCM secret box for broker passwords at rest. The sealed form is one string,
// `v1.<iv>.<tag>.<ciphertext>` (base64url parts), bound to an "additional data" string (the account
// id) so a sealed password copied onto another account's row does not decrypt there.
//
// The key comes from config `secretKey` (32 bytes as 64 hex chars or base64) or, when absent, from
// DATA_DIR/secret.key, generated on first start with mode 0600. Losing that file makes stored
// passwords unreadable (accounts must be bound again); the operations note in
// docs/accounts-and-trading.md says to back it up with the database.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const VERSION = 'v1';

export class SecretKeyError extends Error {}

/** Parses a 32-byte key given as 64 hex characters or base64/base64url. */
export function parseSecretKey(text: string): Buffer {
  const t = text.trim();
  const buf = /^[0-9a-fA-F]{64}$/.test(t) ? Buffer.from(t, 'hex') : Buffer.from(t, 'base64');
  if (buf.length !== 32) throw new SecretKeyError('secretKey must be 32 bytes (64 hex characters or base64)');
  return buf;
}

export function secretKeyPath(dataDir: string): string {
  return join(dataDir, 'secret.key');
}

/** The configured key, or the one in DATA_DIR/secret.key; undefined when neither exists. */
export function loadSecretKey(configured: string | undefined, dataDir: string): Buffer | undefined {
  if (configured) return parseSecretKey(configured);
  const file = secretKeyPath(dataDir);
  return existsSync(file) ? parseSecretKey(readKeyFile(file)) : undefined;
}

/** readFileSync, but its error names the file (a directory's EISDIR carries no path otherwise). */
export function readKeyFile(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    e.path ??= file;
    throw e;
  }
}

/** Creates DATA_DIR/secret.key (mode 0600) holding `key`; never overwrites one that exists. */
export function writeSecretKey(dataDir: string, key: Buffer): void {
  const file = secretKeyPath(dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600); // the mode given to writeFileSync is masked by the umask
}

export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new SecretKeyError('AES-256-GCM needs a 32-byte key');
  }

  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    c.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
    return [VERSION, iv.toString('base64url'), c.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }

  /** Throws when the box was sealed with another key, for another aad, or was tampered with. */
  open(sealed: string, aad: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 4 || parts[0] !== VERSION) throw new SecretKeyError('not a sealed secret');
    const d = createDecipheriv('aes-256-gcm', this.key, Buffer.from(parts[1]!, 'base64url'));
    d.setAAD(Buffer.from(aad, 'utf8'));
    d.setAuthTag(Buffer.from(parts[2]!, 'base64url'));
    return Buffer.concat([d.update(Buffer.from(parts[3]!, 'base64url')), d.final()]).toString('utf8');
  }
}
