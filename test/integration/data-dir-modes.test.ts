// Files the gateway makes in DATA_DIR hold key hashes, sealed broker passwords, logins and orders:
// each is for the gateway's user only (0600), also in a DATA_DIR the operator made beforehand with
// looser permissions (the directory's own 0700 then protects nothing), as a backup is.
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const dirs: string[] = [];
const running: TestGateway[] = [];
afterEach(async () => {
  for (const g of running.splice(0)) await g.stop();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

it('in a DATA_DIR made 0755 beforehand, the database and its WAL and shm files are 0600', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tagw-modes-'));
  dirs.push(dataDir);
  chmodSync(dataDir, 0o755);
  const g = await startTestGateway({ shards: 1 }, { dataDir });
  running.push(g);
  const key = (await g.req('POST', '/v1/keys', { headers: mgmt(g.managementKey), body: { label: 'k' } })).body.key as string;
  expect((await g.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'modes', password: 'pw-secret', server: 'Sim-P5-Demo' } })).status).toBe(200);
  const files = ['tagw.sqlite', 'tagw.sqlite-wal', 'tagw.sqlite-shm', 'secret.key'].map((f) => join(dataDir, f));
  for (const f of files) expect(existsSync(f), f).toBe(true);
  const modes = Object.fromEntries(files.map((f) => [f, (statSync(f).mode & 0o777).toString(8)]));
  expect(modes).toEqual(Object.fromEntries(files.map((f) => [f, '600'])));
}, 60_000);
