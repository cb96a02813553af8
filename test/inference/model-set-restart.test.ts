import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { startupModelSet } from '../../src/inference/index.ts';
import { startApi } from '../helpers/api.ts';
import { startEngine } from '../../src/cluster/index.ts';
import { ConfigError, loadConfig } from '../../src/config/index.ts';
import type { Logger } from '../../src/observability/index.ts';
import { ROOT, runCli, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// Issue 25: an activation outlives a restart while MODEL_SET is what it replaced; a changed
// MODEL_SET wins; a mistyped one is a one-line error.
const MODELS = join(import.meta.dirname, '../../models');
const root = tempDir('models-');
for (const set of ['raw_v1', 'bgr80_ensemble_v1']) cpSync(join(MODELS, set), join(root, set), { recursive: true });
cpSync(join(MODELS, 'bgr80_ensemble_v1'), join(root, 'bgr80_copy'), { recursive: true });
const copyManifest = join(root, 'bgr80_copy', 'manifest.json');
writeFileSync(copyManifest, JSON.stringify({ ...JSON.parse(readFileSync(copyManifest, 'utf8')), model_set: 'bgr80_copy' }));
const dataDir = tempDir();
const env = { MODELS_DIR: root, MODEL_SET: 'bgr80_ensemble_v1', INFERENCE_BACKEND: 'wasm', WARMUP_RUNS: '1' };

t.test('an activation is served again after a restart; a changed MODEL_SET wins', async (t) => {
  // bgr80 has no colour module: disabled, so the service turns ready on it
  t.equal((await runCli(dataDir, ['module', 'disable', 'color_liveness'], '', env)).code, 0);
  // the activation against the service's API in process with its real engine, which hears the
  // CLI's request as a main thread does (test/helpers/api.ts; issue 43: a started server before)
  const first = await startApi({ dataDir, engine: 'real', ready: true, env });
  const act = await first.cli(['models', 'activate', 'raw_v1', '--wait', '300']);
  t.equal(act.code, 0, act.stderr);
  t.match(act.json, { outcome: 'active', active: 'raw_v1' });
  await first.stop();

  // A restart serves the activated set while MODEL_SET is what it replaced, and a changed
  // MODEL_SET wins: that choice is startupModelSet's (src/inference/model-set-requests.ts),
  // which the engine runs first at every start and whose note it logs as a warning
  // (src/cluster/engine-host.ts); read here on the stopped service's DATA_DIR, as the next
  // start would (issue 43: these were two more server starts). A real server started again onto
  // an activated set, serving it and logging that note as a warning, is
  // test/inference/readme-deploy-path.test.ts's.
  const restart = startupModelSet(dataDir, root, env.MODEL_SET);
  t.equal(restart.model_set, 'raw_v1', 'the restart serves the activated set');
  t.match(restart.note, /^serving model set raw_v1, activated at .* over MODEL_SET=bgr80_ensemble_v1/, 'and says why');

  const changed = startupModelSet(dataDir, root, 'bgr80_copy');
  t.equal(changed.model_set, 'bgr80_copy', 'MODEL_SET changed since the activation: it wins');
  t.match(changed.note, /^MODEL_SET changed to bgr80_copy since model set raw_v1 was activated/, 'and says why');
});

// The refusal is the engine's start (startEngine, what main() runs before anything listens),
// called here in process: a ConfigError, which main() turns into its message alone on stderr and
// the fatal line, and exit 1, as test/service/startup.test.ts's real refused start shows for the
// ConfigError of a held port (one branch in src/main.ts). That ran as a start of its own (issue
// 43: a process fewer).
t.test('a mistyped MODEL_SET: one line naming the sets there, exit 1', async (t) => {
  const config = loadConfig({ ...env, MODEL_SET: 'raw_v2', DATA_DIR: tempDir(), WORKERS: '1' }, ROOT, 2);
  const quiet = { info() {}, warn() {}, error() {}, fatal() {}, debug() {} } as unknown as Logger;
  let refused: unknown = null;
  try {
    const engine = startEngine(config, quiet);
    await engine.close();
  } catch (e) {
    refused = e;
  }
  t.ok(refused instanceof ConfigError, `a ConfigError: main() prints its message alone and exits 1 (${String(refused)})`);
  const message = (refused as Error | null)?.message ?? '';
  t.match(message, /^MODEL_SET raw_v2: manifest\.json: cannot be read .* \(model sets in .*: bgr80_copy, bgr80_ensemble_v1, raw_v1\)$/);
  t.notMatch(message, /\n/, 'one line');
});

// An activated set whose manifest still loads but whose graph no longer does (truncated since
// its activation): the start falls back to MODEL_SET, as for a manifest that no longer loads.
// It was served unready (/health/ready 503) until an operator activated another set by hand.
t.test('an activated set whose graph no longer loads gives way to MODEL_SET at the next start', async (t) => {
  const models = tempDir('models-broken-');
  cpSync(join(MODELS, 'bgr80_ensemble_v1'), join(models, 'bgr80_ensemble_v1'), { recursive: true });
  cpSync(join(MODELS, 'bgr80_ensemble_v1'), join(models, 'persist_v1'), { recursive: true });
  const manifest = join(models, 'persist_v1', 'manifest.json');
  writeFileSync(manifest, JSON.stringify({ ...JSON.parse(readFileSync(manifest, 'utf8')), model_set: 'persist_v1' }));
  writeFileSync(join(models, 'persist_v1', 'bgr80_b.onnx'), readFileSync(join(models, 'persist_v1', 'bgr80_b.onnx')).subarray(0, 100));
  const data = tempDir();
  mkdirSync(join(data, 'model-set'), { recursive: true });
  writeFileSync(join(data, 'model-set', 'active.json'), JSON.stringify({ model_set: 'persist_v1', over: 'bgr80_ensemble_v1', at: '2026-11-30T12:00:00.000Z' }));
  const config = loadConfig({ ...env, MODELS_DIR: models, DATA_DIR: data, WORKERS: '1' }, ROOT, 2);
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => void lines.push({ level, obj, msg });
  const log = { info: at('info'), warn: at('warn'), error: at('error'), fatal: at('fatal'), debug() {} } as unknown as Logger;
  const engine = startEngine(config, log, async (id) => id === 'rgb_liveness');
  t.teardown(() => engine.close());
  const served = await waitFor(() => engine.readiness().find((m) => m.module_id === 'rgb_liveness' && m.ready), { what: 'rgb_liveness ready', timeoutMs: 120_000 });
  t.equal(served.model_set, 'bgr80_ensemble_v1', 'MODEL_SET serves; it stayed on persist_v1, unready');
  t.ok(lines.some((l) => l.level === 'error' && l.msg === 'the activated model set does not serve: serving MODEL_SET bgr80_ensemble_v1'), 'said, as an error');
});

// review3 (races): a CLI waiting on its activation while a server starts on the DATA_DIR (a
// kill -9 and a restart, say): the start drops the request unanswered, and the CLI said "no
// answer from a server within 40 s ...; request stays pending" once its whole wait was out,
// of a request nothing would ever act on. It now says at once that the request was dropped.
t.test('a request that a start drops is reported dropped at once, exit 1, not pending after the wait', async (t) => {
  const dir = tempDir();
  t.equal((await runCli(dir, ['module', 'disable', 'color_liveness'], '', env)).code, 0);
  const asked = runCli(dir, ['models', 'activate', 'raw_v1', '--wait', '300'], '', env);
  await waitFor(() => existsSync(join(dir, 'model-set', 'request.json')), { what: 'the request to be written' });
  const server = await startApi({ dataDir: dir, engine: 'real', env });
  t.teardown(() => server.stop());
  const r = await asked;
  t.equal(r.code, 1, r.stderr);
  t.match(r.json, { outcome: 'dropped', model_set: 'raw_v1', reason: /started .* after this request was made and dropped it unanswered/ });
});
