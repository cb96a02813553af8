import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, runCli, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { endlessGraph, externalDataGraph, writeSet } from './hostile-graphs.ts';
import { brightnessSet } from './test-graphs.ts';

// Issue 40: a model set is something operators trust, and a graph file can ask for more than
// arithmetic. Finding 1: an initializer stored as external data at a relative path was read
// from the service's working directory (package.json, DATA_DIR beside it) and leaked through
// the scores, though `models check` refused the set. Finding 6: a graph that never finishes
// wedged model switching for good: Loop is refused here, the time bound is tested in
// model-load-timeout.test.ts.
// (Finding 10, `models import --force` deleting any folder: models-import-force.test.ts.)

const root = tempDir('hostile-');
const modelsDir = join(root, 'models');
mkdirSync(modelsDir);
brightnessSet(t, { root: modelsDir, name: 'good_v1', head: 'logit', kind: 'logit' });
brightnessSet(t, { root: modelsDir, name: 'good_v2', head: 'logit', kind: 'logit', centre: 0.4 });
// the repository's own package.json: the file the red team read, in the server's CWD
const leak = writeSet(modelsDir, 'leak_v1', externalDataGraph(32, 'package.json'));
const loop = writeSet(modelsDir, 'loop_v1', endlessGraph(32));
const EXTERNAL = /modules\.rgb_liveness\.graphs\[0\] \(frame\.onnx\) tensor "b" \(an initializer of the main graph\) is stored as external data in "package\.json": the service loads only self-contained graphs/;
const LOOP = /modules\.rgb_liveness\.graphs\[0\] \(frame\.onnx\) node "v_end" \(the main graph\) is a Loop, whose number of iterations is data and can be endless/;

const ready = async (baseUrl: string) => {
  const r = await fetch(`${baseUrl}/health/ready`);
  return { status: r.status, body: await r.json() };
};

t.test('external data and Loop: refused by models check, by import, and by the server at start and on activation', async (t) => {
  const dataDir = tempDir();
  const env = { MODELS_DIR: modelsDir, MODEL_SET: 'good_v1', WARMUP_RUNS: '1' };
  for (const [dir, why] of [[leak, EXTERNAL], [loop, LOOP]] as const) {
    const check = await runCli(dataDir, ['models', 'check', dir], '', env);
    t.equal(check.code, 1, 'models check fails');
    t.match(check.stderr, why);
    t.match(check.stderr, /result: FAILED/);
    const imp = await runCli(dataDir, ['models', 'import', join(dir, 'frame.onnx'), '--name', 'imported', '--crop-fraction', '1', '--resize', 'area', '--channel-order', 'RGB', '--scale', '1', '--mean', '0,0,0', '--std', '1,1,1', '--output-kind', 'logit'], '', env);
    t.equal(imp.code, 2, 'models import refuses the file before any runtime loads it');
    t.match(imp.stderr, /the file is not an ONNX graph this service accepts: it (tensor "b" .* is stored as external data|node "v_end" .* is a Loop)/);
    t.notOk(existsSync(join(modelsDir, 'imported')), 'nothing written');
  }

  t.equal((await runCli(dataDir, ['module', 'disable', 'color_liveness'], '', env)).code, 0);
  // the service's API in process with its real engine, which hears the CLI's activation
  // requests as a server's main thread does (test/helpers/api.ts; issue 43: a started server before)
  const server = await startApi({ dataDir, engine: 'real', env, ready: true });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  for (const [set, why] of [['leak_v1', EXTERNAL], ['loop_v1', LOOP]] as const) {
    const act = await server.cli(['models', 'activate', set, '--wait', '300']);
    t.equal(act.code, 1, `${set}: the activation is refused`);
    t.match(act.json, { model_set: set, outcome: 'refused', active: 'good_v1' });
    t.match(act.json.reason, why);
    const v = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: `after-${set}` })]));
    t.equal(v.status, 200, v.text);
    t.match(v.json.results[0], { model_set: 'good_v1' }, 'the serving set serves on');
  }
  await server.stop();

  // a start on such a set: the module stays unready with the reason (nothing loads it). The
  // engine's start on it, over real HTTP to the service's API in process (test/helpers/api.ts;
  // issue 43: this was a second server start)
  const onLeak = await startApi({ dataDir: tempDir(), engine: 'real', env: { ...env, MODEL_SET: 'leak_v1' } });
  t.teardown(() => onLeak.stop());
  t.equal((await onLeak.cli(['module', 'disable', 'color_liveness'])).code, 0);
  const h = await waitFor(async () => {
    const r = await ready(onLeak.baseUrl);
    return r.body.modules?.rgb_liveness?.error ? r : undefined;
  }, { what: 'leak_v1 refused at start', timeoutMs: 120_000 });
  t.equal(h.status, 503);
  t.match(h.body.modules.rgb_liveness, { ready: false, model_set: 'leak_v1', error: EXTERNAL });
});
