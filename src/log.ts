// Structured JSON logs, one object per line. Fields whose names suggest a secret are redacted
// wherever they appear, so a careless call site cannot leak a key or a broker password; and a key's
// value anywhere in a line (a request's path, an error's message) loses its secret (redactKeys).
import { writeSync } from 'node:fs';
import { redactKeys } from './util/redactKeys.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };
const SECRET_FIELD = /pass|secret|token|authorization|api[-_]?key|management[-_]?key|^key$|cookie/i;

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

export function redact(value: unknown, depth = 0): unknown {
  if (depth > 6 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack };
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    out[k] = SECRET_FIELD.test(k) ? '[redacted]' : redact(v, depth + 1);
  }
  return out;
}

let stdoutGuarded = false;
let droppedLines = 0;

/** Log lines stdout refused (see guardStdout). */
export function droppedLogLines(): number {
  return droppedLines;
}

/**
 * Stdout that cannot take the process down. A file on a full disk (`npm start >> data/gateway.log`, the
 * log on DATA_DIR's volume): Node writes it synchronously, a write failing ENOSPC destroyed the stream
 * and was emitted as an 'error' event nobody handled, and the gateway died on its line saying "DATA_DIR
 * is full: trading calls answer 503" (a bot saw it vanish, NETWORK_ERROR, instead of 503
 * STORAGE_UNAVAILABLE). Now such a write is dropped and counted, and the stream lives on: the lines
 * that come once space is freed are written (the shards' too: their stdout goes through this one).
 * A pipe whose reader went away (EPIPE) is an error event handled the same way.
 */
function guardStdout(): void {
  if (stdoutGuarded) return;
  stdoutGuarded = true;
  const out = process.stdout as NodeJS.WriteStream & { fd?: unknown; _write?: unknown };
  if (typeof out.fd === 'number' && out.constructor.name === 'SyncWriteStream') {
    const fd = out.fd;
    out._write = (chunk: Uint8Array, _encoding: string, done: () => void): void => {
      try {
        writeSync(fd, chunk);
      } catch {
        droppedLines++;
      }
      done();
    };
  }
  out.on('error', () => void droppedLines++);
}

function writeStdout(line: string): void {
  guardStdout();
  if (process.stdout.destroyed) droppedLines++;
  else process.stdout.write(line);
}

export function createLogger(
  level: LogLevel,
  base: Record<string, unknown> = {},
  write: (line: string) => void = (l) => writeStdout(l + '\n'),
): Logger {
  const min = RANK[level];
  const emit = (lvl: Exclude<LogLevel, 'silent'>, msg: string, fields?: Record<string, unknown>) => {
    if (RANK[lvl] < min) return;
    const rec = { time: new Date().toISOString(), level: lvl, msg, ...base, ...(fields ? (redact(fields) as object) : {}) };
    write(redactKeys(JSON.stringify(rec)));
  };
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => createLogger(level, { ...base, ...(redact(fields) as object) }, write),
  };
}
