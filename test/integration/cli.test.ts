// The tagw command line (issue 16 item 2): every command as a spawned process against a real
// gateway over real sockets, configured only through the environment the gateway was started with
// (PORT, DATA_DIR); restore against a stopped one. The launcher (bin/tagw.js, what `npx tagw`
// runs: the sources through tsx in a checkout) is spawned for --help and `serve`; the other
// commands run the same CLI from this run's compiled build (helpers/build.ts), which starts in a
// fraction of the time.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/errors.js';
import { parseKey } from '../../src/auth/keys.js';
import { table } from '../../src/cli/output.js';
import { mgmt, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { makeCerts } from '../helpers/tls.js';
import { builtCli } from '../helpers/build.js';
import { cleanupProcesses, startProcess } from '../helpers/process.js';
import { freePort } from '../helpers/engines.js';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'tagw.js');
const BUILT = builtCli();
let t: TestGateway;
const work = mkdtempSync(join(tmpdir(), 'tagw-cli-'));

beforeAll(async () => {
  // No GATEWAY_MANAGEMENT_KEY: the CLI finds the generated key in DATA_DIR/bootstrap.json. Two
  // shards: `tagw status` lists each.
  t = await startTestGateway({ managementKey: undefined, shards: 2 });
});
afterAll(async () => {
  await t?.stop();
  rmSync(work, { recursive: true, force: true });
});

interface Run { code: number; stdout: string; stderr: string }

/** Runs `tagw args...` with the gateway's settings in the environment (and nothing secret in argv). */
function tagw(args: string[], env: Record<string, string | undefined> = {}, input?: string, launcher = false): Promise<Run> {
  const e: NodeJS.ProcessEnv = { ...process.env, PORT: String(t.gw.port), HOST: '127.0.0.1', DATA_DIR: t.dataDir, ...env };
  for (const k of ['GATEWAY_MANAGEMENT_KEY', 'TAGW_CONFIG', 'TAGW_URL']) if (!(k in env)) delete e[k];
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete e[k];
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [...(launcher ? [BIN] : BUILT), ...args], { env: e, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
    child.stdin?.end(input ?? '');
  });
}
const json = async (args: string[]) => {
  const r = await tagw(['--json', ...args]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
};
const whoami = (key: string) => t.req('GET', '/v1/whoami', { headers: { 'x-api-key': key } });
const currentKey = () => JSON.parse(readFileSync(join(t.dataDir, 'bootstrap.json'), 'utf8')).managementKey as string;

describe('tagw', () => {
  it('--help lists every command and exits 0; an unknown command is a usage error (2)', async () => {
    const [help, bad] = await Promise.all([tagw(['--help'], {}, undefined, true), tagw(['frobnicate'])]);
    expect(help.code).toBe(0);
    for (const c of ['serve', 'status', 'keys', 'seats', 'accounts', 'mgmt-key', 'backup', 'restore', 'migrate', 'calendar']) expect(help.stdout).toContain(`  ${c}`);
    expect(help.stdout).toContain('Exit codes');
    expect(bad.code).toBe(EXIT.USAGE);
  }, 30_000);

  it('a command missing its subcommand (`tagw keys`, bare `tagw`) is a usage error (2) with the help on stderr; `tagw help keys` exits 0', async () => {
    const [bare, keys, asked] = await Promise.all([tagw([]), tagw(['keys']), tagw(['help', 'keys'])]);
    expect({ bare: bare.code, keys: keys.code, asked: asked.code }).toEqual({ bare: EXIT.USAGE, keys: EXIT.USAGE, asked: EXIT.OK });
    expect(keys.stderr).toContain('Usage: tagw keys');
    expect(keys.stdout).toBe('');
    expect(asked.stdout).toContain('Usage: tagw keys');
  }, 30_000);

  it('keys create shows the secret once; list shows it without; limits, replace and revoke act at once', async () => {
    const created = await tagw(['keys', 'create', '--label', 'cli-bot']);
    expect(created.code, created.stderr).toBe(0);
    const key = /tagw_k_[0-9a-f]{16}_\S{43}/.exec(created.stdout)![0];
    expect(created.stdout).toContain('Shown once');
    expect((await whoami(key)).status).toBe(200);
    const id = key.split('_')[2]!;

    const [listed, human] = await Promise.all([json(['keys', 'list']), tagw(['keys', 'list'])]);
    expect(listed.keys.find((k: { id: string }) => k.id === id)).toMatchObject({ label: 'cli-bot', revoked: false });
    expect(human.stdout.split('\n')[0]).toMatch(/^ID\s+KIND\s+LABEL\s+SCOPE\s+CREATED\s+LAST USED\s+LIMITS\s+STATE$/);
    expect(human.stdout).toMatch(new RegExp(`^${id}\\s+api\\s+cli-bot\\s+full\\s`, 'm'));
    for (const out of [JSON.stringify(listed), human.stdout]) expect(out).not.toContain(key.split('_').slice(3).join('_')); // the secret (base64url: it may hold '_')

    const limited = await json(['keys', 'limits', id, '--requests', '7']);
    expect(limited).toMatchObject({ id, requestsPerSec: 7, ordersPerSec: null });
    // An id that is no API key of the customer: the gateway's 404 with its code, as other errors.
    const unknown = await tagw(['keys', 'limits', '0123456789abcdef', '--orders', '3']);
    expect(unknown.code).toBe(EXIT.FAILED);
    expect(unknown.stderr).toBe('tagw: PUT /v1/keys/0123456789abcdef/limits: 404 NOT_FOUND: key not found\n');

    const replaced = await json(['keys', 'replace', id]);
    expect(replaced).toMatchObject({ replaced: id, label: 'cli-bot' });
    expect((await whoami(key)).status).toBe(401);
    expect((await whoami(replaced.key)).status).toBe(200);
    expect(t.gw.services.tenancy.keyById(replaced.id)).toMatchObject({ requests_per_sec: 7 });

    const revoked = await tagw(['keys', 'revoke', replaced.id]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toBe(`Revoked ${replaced.id}.\n`);
    expect((await whoami(replaced.key)).status).toBe(401);
    const again = await tagw(['keys', 'replace', replaced.id]);
    expect(again.code).toBe(EXIT.FAILED);
    expect(again.stderr).toMatch(/^tagw: POST \/v1\/keys\/[0-9a-f]+\/replace: 409 CONFLICT: /);
  }, 60_000);

  it('seats create, list, show and delete (delete needs --yes); a scoped key is created under a seat', async () => {
    const seat = await json(['seats', 'create', '--private', '--region', 'us-east']);
    expect(seat).toMatchObject({ status: 'BUILDING_SERVER', privateHosting: true, region: 'us-east' });
    const scoped = await json(['keys', 'create', '--label', 'dash', '--seat', seat.id, '--read-only', '--account-scoped']);
    expect(scoped).toMatchObject({ readOnly: true, accountScoped: true, seatId: seat.id });
    const [list, show] = await Promise.all([tagw(['seats', 'list']), tagw(['seats', 'show', seat.id])]);
    expect(list.stdout).toMatch(new RegExp(`^${seat.id}\\s+(BUILDING_SERVER|ACTIVE)\\s+private \\(us-east\\)\\s+17 USD/month`, 'm'));
    expect(show.stdout).toMatch(/^hosting: private \(us-east\)$/m);
    expect(show.stdout).toMatch(new RegExp(`^${scoped.id}\\s+dash\\s+read-only\\s+never\\s+live$`, 'm'));

    const unconfirmed = await tagw(['seats', 'delete', seat.id]);
    expect(unconfirmed.code).toBe(EXIT.USAGE);
    expect((await t.req('GET', `/v1/seats/${seat.id}`, { headers: mgmt(currentKey()) })).status).toBe(200);
    const del = await json(['seats', 'delete', seat.id, '--yes']);
    expect(del).toEqual({ id: seat.id, removed: true, revokedKeys: [scoped.id] });
    expect((await whoami(scoped.key)).status).toBe(401);
    expect((await t.req('GET', `/v1/seats/${seat.id}`, { headers: mgmt(currentKey()) })).status).toBe(404);
  }, 60_000);

  it('status, accounts list, show and reconnect', async () => {
    const key = (await t.req('POST', '/v1/keys', { headers: mgmt(currentKey()), body: { label: 'binder' } })).body.key as string;
    const id = (await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: 'cli-reconnect', password: 'pw', server: 'Sim-P5-Demo' } })).body.id as string;
    const [status, list] = await Promise.all([json(['status']), tagw(['accounts', 'list'])]);
    expect(status).toMatchObject({ health: 'ok', ready: true, version: '0.1.0', shards: [{ index: 0, ready: true }, { index: 1, ready: true }] });
    expect(status.schemaVersion).toBeGreaterThan(0);
    expect(status.accounts.connected).toBeGreaterThanOrEqual(1);
    expect(list.stdout.split('\n')[0]).toMatch(/^ID\s+PLATFORM\s+SERVER\s+PHASE\s+SINCE\s+LAST ERROR$/);
    expect(list.stdout).toMatch(new RegExp(`^${id}\\s+P5\\s+Sim-P5-Demo\\s+connected\\s`, 'm'));
    const reconnect = await tagw(['accounts', 'reconnect', id]);
    expect(reconnect.stdout).toMatch(new RegExp(`^Reconnected ${id}: connected \\(replacement #1 of its broker connection\\)\\.$`, 'm'));
    const show = await json(['accounts', 'show', id]);
    expect(show).toMatchObject({ id, platform: 'P5', phase: 'connected', synced: true });
    expect(show.history.map((h: { phase: string }) => h.phase)).toEqual(['connecting', 'connected', 'connecting', 'connected']);
  }, 60_000);

  it('a user and password in TAGW_URL are never printed: not in status, not in an error', async () => {
    const up = await tagw(['status'], { TAGW_URL: `http://ops:urlS3cret@127.0.0.1:${t.gw.port}` });
    expect(up.code, up.stderr).toBe(0);
    expect(up.stdout).toContain(`gateway:        http://[redacted]@127.0.0.1:${t.gw.port}`);
    const down = await tagw(['status'], { TAGW_URL: `http://ops:urlS3cret@127.0.0.1:${await freePort()}` });
    expect(down.code).toBe(EXIT.UNREACHABLE);
    expect(down.stderr).toMatch(/^tagw: no gateway answers at http:\/\/\[redacted\]@127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
    expect(up.stdout + up.stderr + down.stdout + down.stderr).not.toContain('urlS3cret');
  });

  it('the management key: from GATEWAY_MANAGEMENT_KEY, bootstrap.json, a file or stdin; a refused one is exit 6; rotate keeps the CLI working', async () => {
    const [wrong, noKey] = await Promise.all([
      tagw(['seats', 'list'], { GATEWAY_MANAGEMENT_KEY: 'not-the-management-key-0000' }),
      tagw(['seats', 'list'], { DATA_DIR: join(work, 'empty') }),
    ]);
    expect(wrong.code).toBe(EXIT.AUTH);
    expect(wrong.stderr).not.toContain('not-the-management-key');
    expect(noKey.code).toBe(EXIT.AUTH);
    expect(noKey.stderr).toMatch(/no management key/);

    const before = currentKey();
    const rotated = await tagw(['mgmt-key', 'rotate']);
    expect(rotated.code, rotated.stderr).toBe(0);
    const fresh = /tagw_m_[0-9a-f]{16}_\S{43}/.exec(rotated.stdout)![0];
    expect(fresh).not.toBe(before);
    expect(currentKey()).toBe(fresh); // bootstrap.json rewritten by the gateway
    // and the CLI says so, rather than "updated when it held it" (was it?)
    expect(rotated.stdout).toContain(`${parseKey(before)!.id} is revoked; the gateway's DATA_DIR/bootstrap.json now holds the new key`);
    expect((await t.req('GET', '/v1/seats', { headers: mgmt(before) })).status).toBe(401);

    const file = join(work, 'mk');
    writeFileSync(file, `${fresh}\n`, { mode: 0o600 });
    const [viaBootstrap, viaFile, viaStdin] = await Promise.all([
      tagw(['seats', 'list']),
      tagw(['--management-key-file', file, 'seats', 'list'], { DATA_DIR: join(work, 'empty') }),
      tagw(['--management-key-stdin', 'seats', 'list'], { DATA_DIR: join(work, 'empty') }, `${fresh}\n`),
    ]);
    expect(viaBootstrap.code, viaBootstrap.stderr).toBe(0);
    expect(viaFile.code, viaFile.stderr).toBe(0);
    expect(viaStdin.code, viaStdin.stderr).toBe(0);
  }, 60_000);

  it('backup while serving, migrate --check, restore refused while running (4) and done once stopped; then no gateway answers (3)', async () => {
    const backupFile = join(work, 'gw.bak');
    const b = await json(['backup', backupFile]);
    expect(b).toMatchObject({ file: backupFile });
    expect(existsSync(backupFile)).toBe(true);
    const [again, plan, busy] = await Promise.all([tagw(['backup', backupFile]), json(['migrate', '--check']), tagw(['restore', backupFile])]);
    expect(again.code).toBe(EXIT.FAILED); // a backup never overwrites
    expect(plan).toMatchObject({ tooNew: false, pending: [] });
    expect(plan.current).toBe(plan.target);
    expect(busy.code).toBe(EXIT.DATA_DIR_IN_USE);
    // With a cluster's settings (no engine is contacted) the file is that node's SQLite, a mirror of
    // PostgreSQL, not a backup of the cluster: it says so, and where the cluster's is made.
    const cluster = { NATS_URL: 'nats://127.0.0.1:4222', DATABASE_URL: 'postgres://tagw:pw@127.0.0.1:5432/tagw', BROKER_MODE: 'bridge', BRIDGE_URL: 'tcp://127.0.0.1:4510' };
    const node = await tagw(['backup', join(work, 'node.bak')], cluster);
    expect(node.code, node.stderr).toBe(0);
    expect(node.stdout).toMatch(/^cluster: +this node's SQLite, a mirror of the cluster database: NOT a backup of the cluster; back up PostgreSQL .*docs\/cluster\.md#backup-and-restore/m);
    expect(node.stdout + node.stderr).not.toContain(':pw@');
    await t.gw.close();
    const restored = await json(['restore', backupFile]);
    expect(restored).toMatchObject({ schemaVersion: plan.current, secretKey: { matches: true } });
    const down = await tagw(['seats', 'list']);
    expect(down.code).toBe(EXIT.UNREACHABLE);
    expect(down.stderr).toMatch(/no gateway answers at http:\/\/127\.0\.0\.1:\d+/);
  }, 60_000);
});

describe('tagw serve', () => {
  afterAll(() => cleanupProcesses());
  it('runs the gateway from the launcher (as npx tagw serve does) until SIGTERM, then exits 0', async () => {
    const p = startProcess({ LOG_LEVEL: 'info' }, undefined, [BIN, 'serve']);
    const url = await p.listening;
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 60_000);
});

describe('tagw over HTTPS', () => {
  it('reaches a TLS gateway from TLS_CERT_FILE, trusting TAGW_CA_FILE; an untrusted certificate gets no key (3)', async () => {
    const certs = makeCerts(work);
    const g = await startTestGateway({ managementKey: undefined, tlsCertFile: certs.a.cert, tlsKeyFile: certs.a.key });
    try {
      const env = { PORT: String(g.gw.port), DATA_DIR: g.dataDir, TLS_CERT_FILE: certs.a.cert, TLS_KEY_FILE: certs.a.key };
      const [ok, untrusted] = await Promise.all([
        tagw(['--json', 'seats', 'list'], { ...env, TAGW_CA_FILE: certs.ca }),
        tagw(['seats', 'list'], env),
      ]);
      expect(ok.code, ok.stderr).toBe(0);
      expect(JSON.parse(ok.stdout)).toEqual({ seats: [] });
      expect(untrusted.code).toBe(EXIT.UNREACHABLE);
      expect(untrusted.stderr).toMatch(/TLS certificate is not trusted here/);
    } finally {
      await g.stop();
    }
  }, 60_000);
});

describe('tagw over HTTPS with a certificate for a DNS name (as from Let\'s Encrypt)', () => {
  it('beside the gateway (HOST/PORT, loopback) checks the certificate against its own DNS name: no TAGW_URL needed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tagw-cli-dns-'));
    try {
      const certs = makeCerts(dir);
      writeFileSync(join(dir, 'dns.ext'), 'subjectAltName=DNS:gw.tagw.test\n');
      const ssl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
      ssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'dns.key', '-out', 'dns.csr', '-subj', '/CN=gw.tagw.test']);
      ssl(['x509', '-req', '-in', 'dns.csr', '-CA', 'test-ca.crt', '-CAkey', 'test-ca.key', '-CAcreateserial', '-out', 'dns.crt', '-days', '2', '-extfile', 'dns.ext']);
      const g = await startTestGateway({ managementKey: undefined, tlsCertFile: join(dir, 'dns.crt'), tlsKeyFile: join(dir, 'dns.key') });
      try {
        const env = { PORT: String(g.gw.port), DATA_DIR: g.dataDir, TLS_CERT_FILE: join(dir, 'dns.crt'), TLS_KEY_FILE: join(dir, 'dns.key'), TAGW_CA_FILE: certs.ca };
        const [ok, wrongName] = await Promise.all([
          tagw(['--json', 'seats', 'list'], env),
          // An address given by hand is checked as given: 127.0.0.1 is not a name of that certificate.
          tagw(['seats', 'list'], { ...env, TAGW_URL: `https://127.0.0.1:${g.gw.port}` }),
        ]);
        expect(ok.code, ok.stderr).toBe(0);
        expect(JSON.parse(ok.stdout)).toEqual({ seats: [] });
        expect(wrongName.code).toBe(EXIT.UNREACHABLE);
        expect(wrongName.stderr).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
      } finally {
        await g.stop();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('table', () => {
  it('a reader that goes away (`tagw ... | head`) ends the command quietly, exit 0, not with a stack trace', async () => {
    const child = spawn(process.execPath, [...BUILT, '--json', 'calendar', 'rules'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy(); // the pipe's read end closed before the first write: EPIPE
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((r) => child.on('close', (c) => r(c)));
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
  });

  it('pads columns to the widest cell, shows empty cells as -, and says when there are no rows', () => {
    const cols = [{ header: 'ID', value: (r: { id: string; v: string | null }) => r.id }, { header: 'VALUE', value: (r: { id: string; v: string | null }) => r.v }];
    expect(table([{ id: 'a', v: 'x' }, { id: 'long-id', v: null }], cols)).toBe('ID       VALUE\na        x\nlong-id  -\n');
    expect(table([], cols)).toBe('ID  VALUE\n(none)\n');
  });
});
