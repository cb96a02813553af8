import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
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

// The bound: the two refusals below each wait it out (at 20 s, 40 s of the file's time), and it
// also bounds the good sets' activations (tiny graphs, but a new pool thread loading the WASM
// runtime: ~5 s, and 10.7 s for good_v2 right after the refusal, with the sources run through
// tsx on a host at load 35; their times are printed). 10 s failed there; 15 s left ~4 s of margin
// on this 2-core host under the suite's load, too little for a test that must not fail once under
// load, so it stays at 20 s.
// The default (600 s) is documented in docs/configuration.md (DEFAULT_LOAD_TIMEOUT_MS).
const LOAD_TIMEOUT_S = 20;

t.test('a set whose load and warm-up overrun MODEL_LOAD_TIMEOUT_SECONDS is refused; the serving set stays; later activations work; SIGTERM stops the process', async (t) => {
  // chained 2048x2048 products: about 10^11 multiply-adds a run, minutes on one WASM thread;
  // WASM, so the pool thread can be ended in the middle of a run (workers/inference.ts)
  writeSet(modelsDir, 'slow_v1', slowGraph(32, 2048, 8));
  const dataDir = tempDir();
  const env = { MODELS_DIR: modelsDir, MODEL_SET: 'slow_v1', WARMUP_RUNS: '1', INFERENCE_BACKEND: 'wasm', MODEL_LOAD_TIMEOUT_SECONDS: String(LOAD_TIMEOUT_S) };
  t.equal((await runCli(dataDir, ['module', 'disable', 'color_liveness'], '', env)).code, 0);
  const server = await startServer({ dataDir, env });
  t.teardown(() => server.stop('SIGKILL'));
  // at start: no set serves; the module says why
  const h = await waitFor(async () => {
    const r = await ready(server.baseUrl);
    return r.body.modules?.rgb_liveness?.error ? r : undefined;
  }, { what: 'slow_v1 refused at start', timeoutMs: 120_000 });
  t.equal(h.status, 503);
  t.match(h.body.modules.rgb_liveness, { ready: false, model_set: 'slow_v1', error: new RegExp(`model set slow_v1: load, graph checks and warm-up did not finish within ${LOAD_TIMEOUT_S} s \\(MODEL_LOAD_TIMEOUT_SECONDS\\)`) });
  t.ok(server.logLines().some((l) => l.msg === 'model set refused at start: its modules stay unready'), 'logged');

  // an activation still switches
  let t0 = Date.now();
  const good = await server.cli(['models', 'activate', 'good_v1', '--wait', '300']);
  t.comment(`good_v1 activated in ${Date.now() - t0} ms (the bound: ${LOAD_TIMEOUT_S} s)`);
  t.equal(good.code, 0, good.stdout + good.stderr);
  t.match(good.json, { outcome: 'active', active: 'good_v1' });
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  const v = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'served' })]));
  t.equal(v.status, 200, v.text);

  // the slow set again, now beside a serving one: refused at the bound, the serving set stays
  const slow = await server.cli(['models', 'activate', 'slow_v1', '--wait', '300']);
  t.equal(slow.code, 1);
  t.match(slow.json, { model_set: 'slow_v1', outcome: 'refused', active: 'good_v1', reason: new RegExp(`did not finish within ${LOAD_TIMEOUT_S} s`) });
  const v2 = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'still' })]));
  t.equal(v2.status, 200, v2.text);
  t.match(v2.json.results[0], { model_set: 'good_v1' });
  // and the next activation is not held up by it
  t0 = Date.now();
  const next = await server.cli(['models', 'activate', 'good_v2', '--wait', '300']);
  t.comment(`good_v2 activated in ${Date.now() - t0} ms`);
  t.equal(next.code, 0, next.stderr);
  t.match(next.json, { outcome: 'active', active: 'good_v2' });

  // SIGTERM still ends the process, cleanly
  t.equal(await server.stop('SIGTERM'), 0, 'exit 0 on SIGTERM');
  // and neither refused set's WASM thread, inside its minutes-long warm-up, was waited for:
  // before issue 43's fix each kept computing RELEASE_WAIT_MS (30 s) after its refusal and the
  // SIGTERM waited behind it (pool-close.test.ts shows the thread's end in process)
  t.notOk(server.logLines().some((l) => /did not release its sessions in time/.test(String(l.msg))), 'no pool close waited out its bound');
});

