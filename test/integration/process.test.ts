// The gateway as an operator runs it: a child process started like `npm start` does.
import { chownSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { builtEntry } from '../helpers/build.js';
import { BUILT_MAIN, cleanupProcesses, startProcess, tempDir } from '../helpers/process.js';

afterEach(cleanupProcesses);
const start = startProcess;

describe('process', () => {
  it('refuses to start on the uWS JS fallback unless ALLOW_UWS_FALLBACK=1', async () => {
    const refused = start({ UWS_USE_FALLBACK: '1' });
    expect(await refused.exited).toBe(3);
    expect(refused.output()).toContain('ALLOW_UWS_FALLBACK');
    const allowed = start({ UWS_USE_FALLBACK: '1', ALLOW_UWS_FALLBACK: '1' });
    const url = await allowed.listening;
    expect(allowed.output()).toContain('JS fallback');
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await fetch(`${url}/v1/seats`, { headers: { authorization: 'Bearer nope' } })).status).toBe(401);
    allowed.child.kill('SIGTERM');
    expect(await allowed.exited).toBe(0);
  }, 30_000);

  it('logs that it runs on the native engine', async () => {
    const p = start({});
    await p.listening;
    expect(p.output()).toContain('uWebSockets.js native');
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 30_000);

  it('a DATA_DIR the gateway creates is 0700: its database (orders, broker logins, sealed passwords) is not for other users of the machine', async () => {
    const dir = join(tempDir(), 'data', 'tagw');
    const umask = process.umask(0o022); // the child inherits a usual shell's umask
    let p;
    try {
      p = start({}, dir);
    } finally {
      process.umask(umask);
    }
    await p.listening;
    expect((statSync(dir).mode & 0o777).toString(8)).toBe('700');
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 30_000);

  it('first start prints a management key once and saves it 0600; a later start does not print it again', async () => {
    const first = start({});
    const url = await first.listening;
    const saved = JSON.parse(readFileSync(join(first.dir, 'bootstrap.json'), 'utf8')) as { managementKey: string };
    expect(first.output()).toContain(saved.managementKey);
    expect(statSync(join(first.dir, 'bootstrap.json')).mode & 0o777).toBe(0o600);
    const r = await fetch(`${url}/v1/seats`, { headers: { authorization: `Bearer ${saved.managementKey}` } });
    expect(r.status).toBe(200);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const second = start({}, first.dir);
    await second.listening;
    expect(second.output()).not.toContain(saved.managementKey);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 30_000);

  it('a first start that fails before listening leaves its key to be printed by the next start that listens, once', async () => {
    const dir = tempDir();
    const failed = start({ HOST: '999.1.1.1' }, dir); // refused at listen, after the key was made
    expect(await failed.exited).toBe(2);
    const saved = JSON.parse(readFileSync(join(dir, 'bootstrap.json'), 'utf8')) as { managementKey: string };
    expect(failed.output()).not.toContain(saved.managementKey);
    const next = start({}, dir);
    await next.listening;
    expect(next.output()).toContain(saved.managementKey);
    next.child.kill('SIGTERM');
    expect(await next.exited).toBe(0);
    expect(statSync(join(dir, 'bootstrap.json')).mode & 0o777).toBe(0o600);
    const third = start({}, dir);
    await third.listening;
    expect(third.output()).not.toContain(saved.managementKey);
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
  }, 45_000);

  // A reset that removed the database but kept bootstrap.json (or a file that is not JSON): the new
  // key is what bootstrap.json holds afterwards, as the start says; before, the file kept the old,
  // no longer valid key (or nothing usable).
  it.each([
    ['a stale key', JSON.stringify({ customerId: 'gone', managementKey: 'tagw_m_stale.0000', shown: true })],
    ['not JSON', '{ half a file'],
  ])('a first start over a bootstrap.json holding %s writes the new key there', async (_name, stale) => {
    const dir = tempDir();
    writeFileSync(join(dir, 'bootstrap.json'), stale);
    const p = start({}, dir);
    const url = await p.listening;
    const saved = JSON.parse(readFileSync(join(dir, 'bootstrap.json'), 'utf8')) as { managementKey: string };
    expect(saved.managementKey).not.toBe('tagw_m_stale.0000');
    expect(p.output()).toContain(saved.managementKey);
    expect(statSync(join(dir, 'bootstrap.json')).mode & 0o777).toBe(0o600);
    expect((await fetch(`${url}/v1/seats`, { headers: { authorization: `Bearer ${saved.managementKey}` } })).status).toBe(200);
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  }, 30_000);

  it('GATEWAY_MANAGEMENT_KEY is a valid management key and is never logged', async () => {
    const key = 'scripted-setup-key-abcdefghijklmnop';
    const p = start({ GATEWAY_MANAGEMENT_KEY: key, LOG_LEVEL: 'debug' });
    const url = await p.listening;
    const ok = await fetch(`${url}/v1/seats`, { method: 'POST', headers: { 'x-management-key': key, 'content-type': 'application/json' }, body: '{}' });
    expect(ok.status).toBe(201);
    const bad = await fetch(`${url}/v1/seats`, { headers: { 'x-management-key': key + 'x' } });
    expect(bad.status).toBe(401);
    p.child.kill('SIGTERM');
    await p.exited;
    expect(p.output()).not.toContain(key);
  }, 30_000);

  /** POST /v1/seats whose body is half sent when `signal` runs, and finished 300 ms later. */
  function seatPostAcrossSignals(url: URL, key: string, signal: () => void): Promise<{ status: number; body: string }> {
    const body = JSON.stringify({ privateHosting: false, region: 'eu-west' });
    return new Promise((resolve, reject) => {
      const req = request({
        host: url.hostname, port: url.port, path: '/v1/seats', method: 'POST',
        headers: { 'x-management-key': key, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      }, (res) => {
        let b = '';
        res.on('data', (d: Buffer) => (b += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body: b }));
      });
      req.on('error', reject);
      // Half the body now; the request is in flight when the signal arrives.
      req.write(body.slice(0, 10));
      setTimeout(() => {
        signal();
        setTimeout(() => req.end(body.slice(10)), 300);
      }, 200);
    });
  }

  it('SIGTERM lets a request in flight finish, then exits 0', async () => {
    const key = 'scripted-setup-key-abcdefghijklmnop';
    const p = start({ GATEWAY_MANAGEMENT_KEY: key });
    const r = await seatPostAcrossSignals(new URL(await p.listening), key, () => p.child.kill('SIGTERM'));
    expect(r.status).toBe(201);
    expect(JSON.parse(r.body)).toMatchObject({ status: 'ACTIVE', region: 'eu-west' });
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('gateway stopped');
  }, 30_000);

  it('a second signal during the drain (Ctrl-C under npm start sends two SIGINTs) does not cut it short', async () => {
    const key = 'scripted-setup-key-abcdefghijklmnop';
    const p = start({ GATEWAY_MANAGEMENT_KEY: key });
    const r = await seatPostAcrossSignals(new URL(await p.listening), key, () => {
      // The terminal's SIGINT, npm's forwarded one, then an impatient SIGTERM.
      p.child.kill('SIGINT');
      setTimeout(() => p.child.kill('SIGINT'), 50);
      setTimeout(() => p.child.kill('SIGTERM'), 100);
    });
    expect(r.status).toBe(201);
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('gateway stopped');
  }, 30_000);

  it('SIGTERM with /v1/stream sockets open: each is closed with 1001 and the log gets no warning per socket', async () => {
    const mk = 'scripted-setup-key-abcdefghijklmnop';
    const p = start({ GATEWAY_MANAGEMENT_KEY: mk });
    const url = await p.listening;
    const post = (path: string, headers: Record<string, string>, body: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }).then((r) => r.json() as Promise<Record<string, string>>);
    const { key } = await post('/v1/keys', { authorization: `Bearer ${mk}` }, { label: 'k' });
    const { id } = await post('/ConnectEx', { 'x-api-key': key! }, { user: 'drain', password: 'pw', server: 'Sim-P5-Demo' });
    const codes: Array<Promise<number>> = [];
    for (let i = 0; i < 5; i++) {
      const ws = new WebSocket(`${url.replace('http', 'ws')}/v1/stream?apiKey=${key}&id=${id}`);
      await new Promise<void>((resolve, reject) => { ws.on('open', () => resolve()); ws.on('error', reject); });
      codes.push(new Promise((resolve) => ws.on('close', (code) => resolve(code))));
    }
    p.child.kill('SIGTERM');
    expect(await Promise.all(codes)).toEqual([1001, 1001, 1001, 1001, 1001]);
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('gateway stopped');
    expect(p.output()).not.toContain('stream.close failed');
  }, 30_000);

  it('npm start (the compiled build) binds a broker login, quotes and trades, and stops on a SIGTERM sent to npm', async () => {
    // `npm start` = `npm run build` (tsc -p tsconfig.build.json into dist/) + node dist/src/main.js,
    // run from the package root. Paths that differ between the sources and the build (the shipped
    // simulator servers file) only show here. The signal goes to npm, as a supervisor or
    // `docker stop` sends it: the script execs node, so the gateway gets it and drains.
    const mk = 'scripted-setup-key-abcdefghijklmnop';
    const p = start({ GATEWAY_MANAGEMENT_KEY: mk }, undefined, ['start', '--silent'], 'npm');
    const url = await p.listening;
    const post = (path: string, headers: Record<string, string>, body: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const key = ((await (await post('/v1/keys', { authorization: `Bearer ${mk}` }, { label: 'k' })).json()) as { key: string }).key;
    const bound = await post('/ConnectEx', { 'x-api-key': key }, { user: 'built', password: 'pw', server: 'Sim-P5-Demo' });
    const boundBody = (await bound.json()) as { id: string };
    expect(bound.status, JSON.stringify(boundBody)).toBe(200);
    const h = { 'x-api-key': key };
    const quote = await fetch(`${url}/GetQuote?id=${boundBody.id}&symbol=BTCUSD`, { headers: h });
    expect(quote.status).toBe(200);
    expect((await quote.json()) as object).toMatchObject({ symbol: 'BTCUSD' });
    const order = await fetch(`${url}/OrderSend?id=${boundBody.id}&symbol=BTCUSD&operation=Buy&volume=0.01&clientOrderId=built-1`, { headers: h });
    expect(order.status).toBe(200);
    expect(((await order.json()) as { ticket: number }).ticket).toBeGreaterThan(0);
    expect((await fetch(`${url}/news`, { headers: h })).status).toBe(200);
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('gateway stopped');
    // Nothing left serving: the port is closed.
    await expect(fetch(`${url}/healthz`)).rejects.toThrow();
  }, 90_000);

  it('configuration mistakes are one line (no stack trace) and a non-zero exit, before anything serves', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'bad.json'), '{bad');
    writeFileSync(join(dir, 'a-file'), '');
    writeFileSync(join(dir, 'typo.json'), JSON.stringify({ prot: 8081, logLevel: 'info' }));
    writeFileSync(join(dir, 'list.json'), '[]');
    const cases: Array<[Record<string, string>, number, RegExp]> = [
      [{ BROKER_MODE: 'bridge' }, 2, /BROKER_MODE=bridge needs BRIDGE_URL/],
      [{ SIM_SERVERS_FILE: join(dir, 'bad.json') }, 2, /SIM_SERVERS_FILE .*bad\.json: .*JSON/],
      [{ SIM_SERVERS_FILE: join(dir, 'missing.json') }, 2, /SIM_SERVERS_FILE .*missing\.json: ENOENT/],
      [{ TAGW_SECRET_KEY: 'abc' }, 2, /TAGW_SECRET_KEY: .*32 bytes/],
      [{ PORT: 'abc', SHARDS: '0' }, 2, /invalid configuration: port: .*; shards: /],
      [{ HOST: '999.1.1.1' }, 2, /cannot listen on 999\.1\.1\.1:0: the port is in use, or 999\.1\.1\.1 is not an address/],
      [{ DATA_DIR: join(dir, 'a-file') }, 1, /fatal: cannot mkdir .*a-file: EEXIST/],
      // A misspelt setting in the file is not left out silently (the gateway started on 8080).
      [{ TAGW_CONFIG: join(dir, 'typo.json') }, 2, /TAGW_CONFIG .*typo\.json: unknown setting 'prot' \(the camelCase keys of src\/config\.ts, e\.g\. port, dataDir\)/],
      [{ TAGW_CONFIG: join(dir, 'list.json') }, 2, /TAGW_CONFIG .*list\.json: not a JSON object/],
      [{ STREAM_SOFT_LIMIT_BYTES: '10000000', STREAM_HARD_LIMIT_BYTES: '5000' }, 2, /invalid configuration: streamSoftLimitBytes: must be below streamHardLimitBytes \(5000\)/],
      [{ SIM_MARKET_HOURS: 'weekends' }, 2, /invalid configuration: simMarketHours: .*"sessions"\|"always"/],
    ];
    // All at once: each is its own process and DATA_DIR, and most of its time is starting node.
    const runs = cases.map(([env, code, message]) => [env, code, message, start(env)] as const);
    for (const [env, code, message, p] of runs) {
      expect(await p.exited, JSON.stringify(env)).toBe(code);
      expect(p.output(), JSON.stringify(env)).toMatch(message);
      expect(p.output(), JSON.stringify(env)).not.toMatch(/\n\s+at /);
    }
  }, 90_000);

  it('a file in DATA_DIR the process cannot use (database, lock, key) is one line naming it, exit 1 (a key file holding no key: exit 2), no stack trace', async () => {
    const cases: Array<[string, (dir: string) => void, RegExp]> = [
      ['database is a directory', (d) => mkdirSync(join(d, 'tagw.sqlite')), /^fatal: cannot open .*tagw\.sqlite: SQLITE_CANTOPEN/m],
      ['database is not a database', (d) => writeFileSync(join(d, 'tagw.sqlite'), Buffer.alloc(4096, 7)), /^fatal: cannot open .*tagw\.sqlite: SQLITE_NOTADB/m],
      ['lock file is a directory', (d) => mkdirSync(join(d, 'gateway.lock')), /^fatal: cannot open .*gateway\.lock: SQLITE_CANTOPEN/m],
      ['key file is a directory', (d) => mkdirSync(join(d, 'secret.key')), /^fatal: cannot read .*secret\.key: EISDIR/m],
    ];
    // Not a key: a configuration mistake (exit 2), named by its file, not as TAGW_SECRET_KEY (which is not set).
    const dir = tempDir();
    writeFileSync(join(dir, 'secret.key'), 'not-a-key\n');
    const badKey = start({}, dir);
    // The others at the same time, each in its own DATA_DIR.
    const runs = cases.map(([name, prepare, message]) => {
      const d = tempDir();
      prepare(d);
      return [name, message, start({}, d)] as const;
    });
    expect(await badKey.exited).toBe(2);
    expect(badKey.output()).toMatch(/secret\.key: secretKey must be 32 bytes/);
    expect(badKey.output()).not.toContain('TAGW_SECRET_KEY');
    for (const [name, message, p] of runs) {
      expect(await p.exited, name).toBe(1);
      expect(p.output(), name).toMatch(message);
      expect(p.output(), name).not.toMatch(/\n\s+at /);
    }
  }, 60_000);

  it('a database its user cannot write (copied or restored as root into a service user\'s DATA_DIR) is one line naming it, exit 1', async () => {
    // SQLite opens a file it may not write read-only without a word: the start went on, the shard
    // died on its first write and was restarted for ever ("shard died; restarting", err
    // "[object Object]"), and the gateway never listened. Running as another user needs root.
    expect(process.getuid?.(), 'this test runs the gateway as user nobody: run it as root').toBe(0);
    const dir = tempDir();
    const first = start({}, dir);
    await first.listening;
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const nobody = 65534;
    chownSync(dir, nobody, nobody);
    for (const f of readdirSync(dir)) if (f !== 'tagw.sqlite') chownSync(join(dir, f), nobody, nobody); // the database stays root's
    const p = start({}, dir, ['-u', 'nobody', '--', process.execPath, BUILT_MAIN], 'runuser');
    expect(await p.exited, p.output()).toBe(1);
    expect(p.output()).toMatch(/^fatal: cannot write .*tagw\.sqlite: EACCES \(owned by uid 0, this process runs as uid 65534\)$/m);
    expect(p.output()).not.toMatch(/shard died|\n\s+at /);
  }, 60_000);

  it('the standalone simulator reports command-line mistakes in one line, exit 2', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'bad.json'), '{"servers": 5}');
    const cases: Array<[string[], RegExp]> = [
      [['--port', 'abc'], /--port abc: expected a port number/],
      [['--config', join(dir, 'bad.json')], /--config .*bad\.json: servers: /],
      [['--data', join(dir, 'bad.json')], /--data .*bad\.json: EEXIST/],
      // A typo or another option syntax is not ignored (state would silently stay in memory).
      [['--dta', join(dir, 'state')], /unknown option --dta \(options: --port, --seed, --config, --data, --host, --market-hours, --start, --tls-cert, --tls-key\)/],
      [['--market-hours', 'weekends'], /--market-hours weekends: expected sessions or always/],
      [['--port', '0', 'extra'], /unexpected argument extra/],
      [['--tls-cert', join(dir, 'bad.json')], /--tls-cert and --tls-key go together/],
      [['--tls-cert', join(dir, 'bad.json'), '--tls-key', join(dir, 'bad.json')], /--tls-cert .*bad\.json .*: /],
    ];
    // All at once (each its own process).
    const runs = cases.map(([args, message]) => [args, message, start({}, undefined, [builtEntry('src/simServer.ts'), ...args])] as const);
    for (const [args, message, p] of runs) {
      expect(await p.exited, args.join(' ')).toBe(2);
      expect(p.output()).toMatch(message);
      expect(p.output()).not.toMatch(/\n\s+at /);
    }
  }, 60_000);

  it('one gateway per DATA_DIR and per port: a second start is refused; a crashed one leaves no lock behind', async () => {
    const a = start({});
    const url = new URL(await a.listening);
    // Same data directory (another port): refused, exit 4, the first one untouched.
    const b = start({}, a.dir);
    expect(await b.exited).toBe(4);
    expect(b.output()).toContain('is in use by another gateway');
    // Same port (another data directory): refused too (uWS shares ports by default; not here).
    const c = start({ PORT: url.port });
    expect(await c.exited).not.toBe(0);
    expect(c.output()).toContain('cannot listen');
    expect((await fetch(`${url.origin}/healthz`)).status).toBe(200);
    // A gateway that was killed outright leaves a stale lock: the next start takes it over.
    a.child.kill('SIGKILL');
    await a.exited;
    const d = start({}, a.dir);
    await d.listening;
    d.child.kill('SIGTERM');
    expect(await d.exited).toBe(0);
  }, 60_000);
});
