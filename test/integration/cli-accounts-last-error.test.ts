// `tagw accounts list` and `show` say why an account's login attempts fail, also while it never
// connected (its phase stays `connecting`: the connection log held phase changes only, so LAST ERROR
// was `-`): its bridge down, then its stored broker password refused. A real gateway in bridge mode
// restarted on its DATA_DIR, the built CLI; never the password in what it prints.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BrokerAuthError } from '../../src/market/brokerErrors.js';
import { runBuiltCli } from '../helpers/build.js';
import { mgmt, startTestGateway, TEST_MANAGEMENT_KEY, type TestGateway } from '../helpers/gateway.js';
import { startBridgeSim, type BridgeSim } from '../helpers/sim-helpers.js';
import { until } from '../helpers/until.js';

const dataDir = mkdtempSync(join(tmpdir(), 'tagw-last-error-'));
let bs: BridgeSim;
let t: TestGateway | undefined;
const PASSWORDS = { down: 'S3cret-down-pw', refused: 'S3cret-refused-pw' };
beforeAll(async () => {
  bs = await startBridgeSim();
}, 30_000);
afterAll(async () => {
  vi.restoreAllMocks();
  await t?.stop();
  await bs?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const start = () => startTestGateway({ brokerMode: 'bridge', bridgeUrl: bs.url, reconnectBaseMs: 50, reconnectCapMs: 200 }, { dataDir });
const cli = async (args: string[]) => {
  const env: NodeJS.ProcessEnv = { ...process.env, TAGW_URL: t!.url, GATEWAY_MANAGEMENT_KEY: TEST_MANAGEMENT_KEY };
  for (const k of ['TAGW_CONFIG', 'NATS_URL', 'DATABASE_URL', 'DATA_DIR']) delete env[k];
  const run = await runBuiltCli(args, env);
  expect(run.code, run.stderr).toBe(0);
  for (const pw of Object.values(PASSWORDS)) expect(run.stdout + run.stderr).not.toContain(pw);
  return run.stdout;
};
type LastError = { at: string; phase: string; reason?: string } | null;
const lastErrors = async () => Object.fromEntries(((await t!.req('GET', '/v1/accounts/connections', { headers: mgmt(TEST_MANAGEMENT_KEY) })).body.accounts as Array<{ id: string; lastError: LastError }>)
  .map((a) => [a.id, a.lastError]));

describe('an account whose login attempts fail', () => {
  it('never connected, its bridge down: LAST ERROR says why; then its stored password refused: why, in list and show', async () => {
    t = await start();
    const key = (await t.req('POST', '/v1/keys', { headers: mgmt(TEST_MANAGEMENT_KEY), body: { label: 'last-error' } })).body.key as string;
    const ids: Record<string, string> = {};
    for (const [name, password] of Object.entries(PASSWORDS)) {
      const r = await t.req('POST', '/ConnectEx', { headers: { 'x-api-key': key }, body: { user: `le-${name}-${process.pid}`, password, server: 'Sim-P5-Demo' } });
      expect(r.status, r.text).toBe(200);
      ids[name] = r.body.id as string;
    }
    await t.stop();

    // Restarted with its bridge down: the accounts never connect in this process, phase connecting.
    await bs.stopBridge();
    t = await start();
    await until(async () => Object.values(await lastErrors()).every((e) => e?.reason), 'a failed attempt of each account', 10_000);
    const down = (await lastErrors())[ids.down!]!;
    expect(down.phase).toBe('connecting');
    expect(down.reason).toMatch(/ECONNREFUSED|bridge/i);
    const list = await cli(['accounts', 'list']);
    expect(list).toMatch(new RegExp(`^${ids.down}\\s+P5\\s+Sim-P5-Demo\\s+connecting\\s+.*\\s+connecting at \\S+ \\S+: .*(ECONNREFUSED|bridge)`, 'im'));

    // The bridge back, the broker refuses the refused account's stored password (changed at the
    // broker): refused, and why; the other connects.
    const server = bs.sim.server('Sim-P5-Demo')!;
    const login = server.login.bind(server);
    vi.spyOn(server, 'login').mockImplementation((user, password) => {
      if (user === `le-refused-${process.pid}`) throw new BrokerAuthError(`invalid password for login ${user} on Sim-P5-Demo`);
      return login(user, password);
    });
    await bs.restartBridge();
    await until(async () => (await lastErrors())[ids.refused!]?.phase === 'refused', 'the refusal', 10_000);
    const show = await cli(['accounts', 'show', ids.refused!]);
    expect(show).toMatch(/^phase:\s+refused/m);
    expect(show).toMatch(new RegExp(`^last error:\\s+refused at \\S+ \\S+: invalid password for login le-refused-${process.pid} on Sim-P5-Demo$`, 'm'));
    const json = JSON.parse(await cli(['--json', 'accounts', 'show', ids.refused!])) as { lastError: LastError };
    expect(json.lastError).toMatchObject({ phase: 'refused', reason: `invalid password for login le-refused-${process.pid} on Sim-P5-Demo` });
  }, 60_000);
});
