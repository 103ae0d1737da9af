// deploy/tagw.service: systemd accepts every line (a directive it cannot parse is ignored with a
// warning, so the hardening would silently be off) and rates the sandbox's exposure.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/process.js';

const UNIT = join(ROOT, 'deploy', 'tagw.service');

function systemdAnalyze(args: string[]) {
  const r = spawnSync('systemd-analyze', args, { encoding: 'utf8', cwd: '/tmp' });
  if (r.error) throw new Error(`systemd-analyze is needed for this test (apt-get install -y systemd): ${r.error.message}`);
  return r;
}

describe('deploy/tagw.service', () => {
  it('passes systemd-analyze verify without a warning', () => {
    const r = systemdAnalyze(['verify', UNIT]);
    expect(r.stderr.trim()).toBe('');
    expect(r.status).toBe(0);
  });

  it('is sandboxed: the hardening the operations guide promises, and an exposure systemd rates OK or better', () => {
    const unit = readFileSync(UNIT, 'utf8');
    for (const line of ['DynamicUser=yes', 'ProtectSystem=strict', 'StateDirectory=tagw', 'LimitNOFILE=1048576', 'NoNewPrivileges=yes', 'CapabilityBoundingSet=', 'ExecReload=/bin/kill -HUP $MAINPID', 'RestartPreventExitStatus=2 3 4 5']) {
      expect(unit.split('\n'), line).toContain(line);
    }
    const r = systemdAnalyze(['security', '--offline=true', UNIT]);
    const m = /Overall exposure level for tagw\.service: ([\d.]+) (\w+)/.exec(r.stdout);
    expect(m, r.stdout + r.stderr).not.toBeNull();
    expect(Number(m![1])).toBeLessThanOrEqual(2);
  });
});
