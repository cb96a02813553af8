import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, runCli, startServer, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { slowGraph, writeSet } from './hostile-graphs.ts';
import { brightnessSet } from './test-graphs.ts';

// Issue 40 finding 6: a graph that never finishes wedged model switching (the activation never
// ended, later ones queued for ever, SIGTERM no longer stopped the process). Loop, the endless
// kind, is refused before any runtime sees it (hostile-models.test.ts); what is left is a graph
// that is merely too slow, and the bound on load, checks and warm-up that catches it.

const root = tempDir('load-timeout-');
const modelsDir = join(root, 'models');
mkdirSync(modelsDir);
brightnessSet(t, { root: modelsDir, name: 'good_v1', head: 'logit', kind: 'logit' });
brightnessSet(t, { root: modelsDir, name: 'good_v2', head: 'logit', kind: 'logit', centre: 0.4 });

const ready = async (baseUrl: string) => {
  const r = await fetch(`${baseUrl}/health/ready`);
  return { status: r.status, body: await r.json() };
};

// The server's bound: the refusal below waits it out, and it also bounds the good sets' start
// and activation (tiny graphs, but a new pool thread loading the WASM runtime: ~5 s, and 10.7 s
// for good_v2 right after a refusal, with the sources run through tsx on a host at load 35;
// their times are printed). 10 s failed there; 15 s left ~4 s of margin on this 2-core host
// under the suite's load, too little for a test that must not fail once under load, so it stays
// at 20 s.
// The default (600 s) is documented in docs/configuration.md (DEFAULT_LOAD_TIMEOUT_MS).
const LOAD_TIMEOUT_S = 20;

// chained 2048x2048 products: about 10^11 multiply-adds a run, minutes on one WASM thread;
// WASM, so the pool thread can be ended in the middle of a run (workers/inference.ts)
writeSet(modelsDir, 'slow_v1', slowGraph(32, 2048, 8));

// The refusal at start, on the service's API in process (test/helpers/api.ts: startEngine, the
// engine the service starts, its readiness published as the cluster publishes it, real HTTP).
// Its bound is 1 s: nothing else has to load within it here, and the slow set takes minutes
// whatever the load, so it is refused at 1 s as it would be at 20, one burning WASM thread for 1 s
// instead of 20. (Issue 43: this ran on the server below, whose start and bound it shared, and
// waited out 20 s of its CPU. That an activation still switches after a refusal at start, which
// it showed there, is test/inference/model-sets.test.ts's 'a set whose start overruns the load
// bound ...', on engines that never finish, so on the bound alone.)
t.test('a set whose load and warm-up overrun MODEL_LOAD_TIMEOUT_SECONDS at start is refused: its modules stay unready and say why; the stop does not wait for its thread', async (t) => {
  const api = await startApi({ engine: 'real', env: { MODELS_DIR: modelsDir, MODEL_SET: 'slow_v1', WARMUP_RUNS: '1', INFERENCE_BACKEND: 'wasm', MODEL_LOAD_TIMEOUT_SECONDS: '1' } });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : api.stop()));
  const h = await waitFor(async () => {
    const r = await ready(api.baseUrl);
    return r.body.modules?.rgb_liveness?.error ? r : undefined;
  }, { what: 'slow_v1 refused at start', timeoutMs: 120_000 });
  t.equal(h.status, 503);
  t.match(h.body.modules.rgb_liveness, { ready: false, model_set: 'slow_v1', error: /model set slow_v1: load, graph checks and warm-up did not finish within 1 s \(MODEL_LOAD_TIMEOUT_SECONDS\)/ });
  t.ok(api.logLines().some((l) => l.msg === 'model set refused at start: its modules stay unready'), 'logged');
  await api.stop();
  stopped = true;
  // the refused set's WASM thread, inside its minutes-long warm-up, was not waited for (before
  // issue 43's fix it kept computing RELEASE_WAIT_MS, 30 s, after its refusal)
  t.notOk(api.logLines().some((l) => /did not release its sessions in time/.test(String(l.msg))), 'no pool close waited out its bound');
});

t.test('a set whose load and warm-up overrun MODEL_LOAD_TIMEOUT_SECONDS is refused on activation; the serving set stays; later activations work; SIGTERM stops the process', async (t) => {
  const dataDir = tempDir();
  // one API worker (the harness's default is two): nothing here is about several (issue 43)
  const env = { MODELS_DIR: modelsDir, MODEL_SET: 'good_v1', WARMUP_RUNS: '1', INFERENCE_BACKEND: 'wasm', MODEL_LOAD_TIMEOUT_SECONDS: String(LOAD_TIMEOUT_S), WORKERS: '1' };
  t.equal((await runCli(dataDir, ['module', 'disable', 'color_liveness'], '', env)).code, 0);
  const t0 = Date.now();
  const server = await startServer({ dataDir, env, ready: true });
  t.teardown(() => server.stop('SIGKILL'));
  t.comment(`good_v1 started and ready in ${Date.now() - t0} ms (the bound: ${LOAD_TIMEOUT_S} s)`);
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  const v = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'served' })]));
  t.equal(v.status, 200, v.text);

  // the slow set beside a serving one: refused at the bound, the serving set stays
  const slow = await server.cli(['models', 'activate', 'slow_v1', '--wait', '300']);
  t.equal(slow.code, 1);
  t.match(slow.json, { model_set: 'slow_v1', outcome: 'refused', active: 'good_v1', reason: new RegExp(`did not finish within ${LOAD_TIMEOUT_S} s`) });
  const v2 = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'still' })]));
  t.equal(v2.status, 200, v2.text);
  t.match(v2.json.results[0], { model_set: 'good_v1' });
  // and the next activation is not held up by it
  const t1 = Date.now();
  const next = await server.cli(['models', 'activate', 'good_v2', '--wait', '300']);
  t.comment(`good_v2 activated in ${Date.now() - t1} ms`);
  t.equal(next.code, 0, next.stderr);
  t.match(next.json, { outcome: 'active', active: 'good_v2' });

  // SIGTERM still ends the process, cleanly
  t.equal(await server.stop('SIGTERM'), 0, 'exit 0 on SIGTERM');
  // and the refused set's WASM thread, inside its minutes-long warm-up, was not waited for:
  // before issue 43's fix it kept computing RELEASE_WAIT_MS (30 s) after its refusal and the
  // SIGTERM waited behind it (pool-close.test.ts shows the thread's end in process)
  t.notOk(server.logLines().some((l) => /did not release its sessions in time/.test(String(l.msg))), 'no pool close waited out its bound');
});
