// QUOTE_LOGINS_FILE (src/runtime/quoteLogins.ts, checkBrokerConfig): market-data logins per broker
// server. A bad file is a start-up error (ConfigError: exit 2) naming the setting and the file, and
// no message repeats the password or any of the file's text.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../../src/config.js';
import { parseQuoteLogins, QuoteLoginsError } from '../../src/runtime/quoteLogins.js';
import { checkBrokerConfig } from '../../src/startupChecks.js';

const SECRET = 's3cret-Quote-pw';
const CLUSTER = { brokerMode: 'bridge', bridgeUrl: 'tcp://127.0.0.1:4510', natsUrl: 'nats://127.0.0.1:4222', databaseUrl: 'postgres://u:p@127.0.0.1:5432/db' };

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'tagw-quote-logins-')), 'quote-logins.json');
  writeFileSync(path, text);
  return path;
}

/** The start-up check's error for this file text: a ConfigError naming the setting, never the secret. */
function refusal(text: string): string {
  const path = file(text);
  let err: unknown;
  try {
    checkBrokerConfig(parseConfig({ ...CLUSTER, quoteLoginsFile: path }));
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConfigError);
  const message = (err as Error).message;
  expect(message).toContain(`QUOTE_LOGINS_FILE ${path}`);
  expect(message).not.toContain(SECRET);
  return message;
}

describe('quote logins file', () => {
  it('reads a login and password per server, the platform optional', () => {
    const logins = parseQuoteLogins(JSON.stringify({
      'Sim-P5-Demo': { login: 'feed5', password: SECRET },
      'Sim-P4-Demo': { login: 'feed4', password: SECRET, platform: 'P4' },
    }));
    expect(logins.get('Sim-P5-Demo')).toEqual({ login: 'feed5', password: SECRET });
    expect(logins.get('Sim-P4-Demo')).toEqual({ login: 'feed4', password: SECRET, platform: 'P4' });
    expect(logins.size).toBe(2);
  });

  it('a good file passes the start-up check in cluster mode; the setting comes from QUOTE_LOGINS_FILE', () => {
    const path = file(JSON.stringify({ 'Sim-P5-Demo': { login: 'feed', password: SECRET } }));
    const config = loadConfig({ BROKER_MODE: 'bridge', BRIDGE_URL: CLUSTER.bridgeUrl, NATS_URL: CLUSTER.natsUrl, DATABASE_URL: CLUSTER.databaseUrl, QUOTE_LOGINS_FILE: path });
    expect(config.quoteLoginsFile).toBe(path);
    expect(() => checkBrokerConfig(config)).not.toThrow();
  });

  it('refuses a file that is no JSON without quoting its text', () => {
    expect(refusal(`{ "Sim-P5-Demo": { "login": "feed", "password": "${SECRET}" `)).toMatch(/not valid JSON/);
  });

  it('refuses missing fields, naming the server and field', () => {
    expect(refusal(JSON.stringify({ 'Sim-P5-Demo': { login: 'feed' } }))).toMatch(/Sim-P5-Demo\.password/);
    expect(refusal(JSON.stringify({ 'Sim-P5-Demo': { password: SECRET } }))).toMatch(/Sim-P5-Demo\.login/);
    expect(refusal(JSON.stringify({ 'Sim-P5-Demo': { login: '', password: SECRET } }))).toMatch(/Sim-P5-Demo\.login/);
  });

  it('refuses an unknown field (a misspelt one), a bad platform, a server that is no server name, and no server at all', () => {
    expect(refusal(JSON.stringify({ 'Sim-P5-Demo': { login: 'feed', password: SECRET, pasword: SECRET } }))).toMatch(/pasword/);
    expect(refusal(JSON.stringify({ 'Sim-P5-Demo': { login: 'feed', password: SECRET, platform: 'P6' } }))).toMatch(/Sim-P5-Demo\.platform/);
    expect(refusal(JSON.stringify({ '': { login: 'feed', password: SECRET } }))).toMatch(/server name|Too small/);
    expect(refusal(JSON.stringify({ 'Sim\nP5': { login: 'feed', password: SECRET } }))).toMatch(/server name/);
    expect(refusal(JSON.stringify({}))).toMatch(/names no server/);
    expect(refusal(JSON.stringify([{ login: 'feed', password: SECRET }]))).toMatch(/not a JSON object/);
    expect(refusal(JSON.stringify({ 'Sim-P5-Demo': { login: 'feed', password: 42 } }))).toMatch(/Sim-P5-Demo\.password/);
  });

  it('refuses a file that cannot be read, and the setting outside cluster mode', () => {
    const missing = join(tmpdir(), 'tagw-no-such-dir', 'quote-logins.json');
    expect(() => checkBrokerConfig(parseConfig({ ...CLUSTER, quoteLoginsFile: missing }))).toThrow(/QUOTE_LOGINS_FILE .*cannot read it \(ENOENT\)/);
    const path = file(JSON.stringify({ 'Sim-P5-Demo': { login: 'feed', password: SECRET } }));
    expect(() => checkBrokerConfig(parseConfig({ brokerMode: 'bridge', bridgeUrl: CLUSTER.bridgeUrl, quoteLoginsFile: path }))).toThrow(/QUOTE_LOGINS_FILE .*cluster mode/);
  });

  it('its errors are QuoteLoginsErrors that never hold the password', () => {
    expect(() => parseQuoteLogins(`{"S":{"login":"l","password":"${SECRET}",}}`)).toThrow(QuoteLoginsError);
    try {
      parseQuoteLogins(`{"S":{"login":"l","password":"${SECRET}",}}`);
    } catch (e) {
      expect((e as Error).message).not.toContain(SECRET);
    }
  });
});
