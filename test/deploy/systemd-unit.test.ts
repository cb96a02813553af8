import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { DRAIN_TIMEOUT_MS } from '../../src/lifecycle.ts';
import { ROOT } from '../helpers/server.ts';
import { missingTool } from '../helpers/required.ts';

const unitPath = path.join(ROOT, 'deploy/liveness.service');
const unit = fs.readFileSync(unitPath, 'utf8');
const setting = (key: string) => [...unit.matchAll(new RegExp(`^${key}=(.*)$`, 'gm'))].map((m) => m[1]!.trim());

t.test('the unit stops after the drain, not during it', async (t) => {
  const stop = Number(setting('TimeoutStopSec')[0]);
  t.ok(stop * 1000 > DRAIN_TIMEOUT_MS, `TimeoutStopSec ${stop}s > drain ${DRAIN_TIMEOUT_MS / 1000}s`);
  t.same(setting('KillSignal'), ['SIGTERM']);
});

t.test('the unit runs the compiled build directly, as a dedicated user, hardened', async (t) => {
  t.match(setting('ExecStart')[0], /^\/usr\/bin\/node \S+\/dist\/src\/main\.js$/, 'node on dist, no npm and no tsx in between');
  t.same(setting('User'), ['liveness']);
  for (const [k, v] of [['NoNewPrivileges', 'yes'], ['ProtectSystem', 'strict'], ['ProtectHome', 'yes'], ['PrivateTmp', 'yes'], ['Restart', 'on-failure'], ['UMask', '0077']]) {
    t.same(setting(k!), [v], `${k}=${v}`);
  }
  t.same(setting('MemoryDenyWriteExecute'), [], 'not set: V8 needs writable executable memory');
});

t.test('systemd-analyze accepts the unit', async (t) => {
  if (spawnSync('systemd-analyze', ['--version']).status !== 0) return missingTool(t, 'systemd-analyze not installed');
  const r = spawnSync('systemd-analyze', ['verify', unitPath], { encoding: 'utf8' });
  t.equal(r.status, 0);
  t.equal(`${r.stdout}${r.stderr}`.trim(), '', 'no warnings');
});
