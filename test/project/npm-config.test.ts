import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT, runChild, tempDir } from '../helpers/server.ts';

// Issue 39: every npm command warned `Unknown project config "onnxruntime-node-install"` (the
// .npmrc flag that skipped onnxruntime-node's CUDA download). The skip is kept by package.json
// allowScripts; these hold both: no warning in this project, and the script still never runs.
t.test('npm reads this project\'s configuration without a warning', async (t) => {
  const r = await runChild('npm', ['config', 'get', 'registry'], { cwd: ROOT, env: { ...process.env, npm_config_loglevel: 'warn' }, limitMs: 60_000 });
  t.equal(r.code, 0, r.stderr);
  t.notMatch(r.stderr, /Unknown (project|user|env) config/, 'no unknown setting in .npmrc');
  t.equal(r.stderr.trim(), '', 'nothing on stderr at all');
});

t.test('onnxruntime-node\'s install script is skipped by package.json allowScripts', async (t) => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  t.equal(pkg.allowScripts?.['onnxruntime-node'], false, 'denied explicitly');
  const version = pkg.optionalDependencies['onnxruntime-node'];
  // a project with this package.json's policy and .npmrc, and a stand-in onnxruntime-node whose
  // postinstall would leave a mark: npm rebuild runs install scripts as npm ci does
  const dir = tempDir();
  fs.copyFileSync(path.join(ROOT, '.npmrc'), path.join(dir, '.npmrc'));
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'npmrc-probe', version: '1.0.0', private: true, optionalDependencies: { 'onnxruntime-node': version }, allowScripts: pkg.allowScripts }));
  const mod = path.join(dir, 'node_modules', 'onnxruntime-node');
  fs.mkdirSync(mod, { recursive: true });
  const mark = path.join(dir, 'postinstall-ran');
  fs.writeFileSync(path.join(mod, 'package.json'), JSON.stringify({ name: 'onnxruntime-node', version, scripts: { postinstall: `node -e "require('fs').writeFileSync('${mark}', '')"` } }));
  // the test runner's NODE_OPTIONS (its loaders) would not resolve from the probe's folder
  const env = { ...process.env, NODE_OPTIONS: '', ONNXRUNTIME_NODE_INSTALL: '', npm_config_onnxruntime_node_install: '' };
  const r = await runChild('npm', ['rebuild', '--foreground-scripts'], { cwd: dir, env, limitMs: 60_000 });
  t.equal(r.code, 0, r.stderr);
  t.notOk(fs.existsSync(mark), 'the postinstall never ran');
  // the probe can fail: without the policy the same rebuild runs it
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'npmrc-probe', version: '1.0.0', private: true, optionalDependencies: { 'onnxruntime-node': version } }));
  const without = await runChild('npm', ['rebuild', '--foreground-scripts'], { cwd: dir, env, limitMs: 60_000 });
  t.equal(without.code, 0, without.stderr);
  t.ok(fs.existsSync(mark), 'without allowScripts it would have run');
});
