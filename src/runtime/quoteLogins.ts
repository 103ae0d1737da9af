// Market-data logins (QUOTE_LOGINS_FILE, docs/cluster.md "Quote sessions"): per broker server, a
// login a cluster node uses only for quotes, when its sockets follow a symbol of that server and no
// account running on the node is of it. The file is JSON, `{ "<server>": { "login": "...",
// "password": "...", "platform"?: "P4" | "P5" } }`. The password is a secret: no message made here
// repeats it, nor any part of the file's text (a JSON syntax error's message quotes the text).
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { Platform } from '../market/server.js';

export interface QuoteLogin { readonly login: string; readonly password: string; readonly platform?: Platform }
/** Broker server -> its quote login. */
export type QuoteLogins = ReadonlyMap<string, QuoteLogin>;

const Login = z.object({
  login: z.string().min(1).max(128),
  password: z.string().min(1).max(1024),
  platform: z.enum(['P4', 'P5']).optional(),
}).strict();

/** A server's name as the bind routes take it (1-128 characters), without control characters. */
const SERVER_NAME = 'not a broker server name (1-128 characters, no control characters)';
const ServerName = z.string().min(1).max(128).regex(/^[^\u0000-\u001f\u007f]+$/, SERVER_NAME);
/** A path segment as the operator can read it: a server name that is empty or holds control characters quoted. */
const segment = (p: PropertyKey) => (typeof p === 'string' && /^[\x20-\x7e]+$/.test(p) ? p : JSON.stringify(String(p)));

const LoginsFile = z.record(ServerName, Login).refine((r) => Object.keys(r).length > 0, 'names no server: give at least one, or unset the setting');

export class QuoteLoginsError extends Error {}

/** The file's text as quote logins; throws QuoteLoginsError naming what is wrong (never a value). */
export function parseQuoteLogins(text: string): QuoteLogins {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new QuoteLoginsError('not valid JSON (expected { "<server>": { "login": "...", "password": "..." } })');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new QuoteLoginsError('not a JSON object of servers (expected { "<server>": { "login": "...", "password": "..." } })');
  const r = LoginsFile.safeParse(json);
  if (!r.success) {
    // Paths and zod's words only: zod quotes no input value in these issues (types, lengths, keys).
    throw new QuoteLoginsError(r.error.issues.map((i) => `${i.path.map(segment).join('.') || '(root)'}: ${i.code === 'invalid_key' ? SERVER_NAME : i.message}`).join('; '));
  }
  return new Map(Object.entries(r.data).map(([server, l]) => [server, { login: l.login, password: l.password, ...(l.platform ? { platform: l.platform } : {}) }]));
}

/** The file at `path` (absolute). Throws QuoteLoginsError (an unreadable file: its error code only). */
export function loadQuoteLogins(path: string): QuoteLogins {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new QuoteLoginsError(`cannot read it (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseQuoteLogins(text);
}
