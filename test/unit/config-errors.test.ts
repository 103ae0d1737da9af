// A configuration mistake names where the bad value came from: the environment variable (PORT, not
// only the schema's `port`) or the TAGW_CONFIG file, and says what a number setting wants instead of "received NaN".
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const message = (env: Record<string, string>) => {
  try {
    loadConfig(env);
  } catch (e) {
    return (e as Error).message;
  }
  return 'no error';
};

it('names the environment variable of each bad value, and a number setting says it wants a whole number', () => {
  expect(message({ PORT: 'abc', SHARDS: '0' })).toBe(
    'invalid configuration: port: must be a whole number (from PORT); shards: Too small: expected number to be >=1 (from SHARDS)');
  expect(message({ SIM_MARKET_HOURS: 'weekends' })).toMatch(/^invalid configuration: simMarketHours: .*"sessions"\|"always" \(from SIM_MARKET_HOURS\)$/);
  expect(message({ BODY_TIMEOUT_MS: '1.5' })).toBe('invalid configuration: bodyTimeoutMs: must be a whole number (from BODY_TIMEOUT_MS)');
  // An on/off setting said only "Invalid input".
  expect(message({ TRUST_PROXY: 'on' })).toBe('invalid configuration: trustProxy: must be 1, 0, true, false, yes or no (from TRUST_PROXY)');
  expect(loadConfig({ TRUST_PROXY: 'yes', SECRET_KEY_RESET: '0' })).toMatchObject({ trustProxy: true, secretKeyReset: false });
});

it('a bad value from the TAGW_CONFIG file is named by its key there', () => {
  const file = join(mkdtempSync(join(tmpdir(), 'tagw-cfg-')), 'c.json');
  writeFileSync(file, JSON.stringify({ port: 'x' }));
  expect(message({ TAGW_CONFIG: file })).toBe(`invalid configuration: port: must be a whole number (from TAGW_CONFIG ${file})`);
});
