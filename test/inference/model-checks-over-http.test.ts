import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

const MODELS = join(import.meta.dirname, '../../models');

// Over real HTTP to the service's API in process with its real engine (test/helpers/api.ts;
// issue 43: this was a started server): the output check runs where the engine loads the set.

t.test('a graph that fails its output check keeps its module unready, with the reason in /health/ready', async (t) => {
  // raw_v1 with the colour difference graph declared as a 2-class softmax: its one-value
  // logit output cannot be one. rgb_liveness must still load and serve.
  const root = tempDir('models-');
  cpSync(join(MODELS, 'raw_v1'), join(root, 'raw_v1'), { recursive: true });
  const file = join(root, 'raw_v1', 'manifest.json');
  const m = JSON.parse(readFileSync(file, 'utf8'));
  Object.assign(m.modules.color_liveness.graphs[0], { output_kind: 'softmax', live_index: 1 });
  writeFileSync(file, JSON.stringify(m));

  const server = await startApi({ engine: 'real', env: { MODELS_DIR: root, MODEL_SET: 'raw_v1', INFERENCE_BACKEND: 'wasm' } });
  t.teardown(() => server.stop());
  // poll (bounded) until rgb_liveness is warm and colour has its error
  let ready: any;
  let status = 0;
  await waitFor(async () => {
    const r = await fetch(`${server.baseUrl}/health/ready`);
    status = r.status;
    ready = await r.json();
    return ready.modules.rgb_liveness.ready && ready.modules.color_liveness.error;
  }, { timeoutMs: 120_000, intervalMs: 50, what: 'rgb_liveness warm and color_liveness with its error' });
  t.equal(status, 503, 'an enabled module is unready, so the service is not ready');
  t.match(ready, {
    status: 'not_ready',
    modules: {
      rgb_liveness: { ready: true, model_set: 'raw_v1' },
      color_liveness: { ready: false, error: 'modules.color_liveness.graphs[0]: color_difference.onnx output "logit" has 1 value per item; output_kind "softmax" needs at least two classes' },
    },
  });

  const { token } = await makeToken(server, ['rgb_liveness:10:day', 'color_liveness:10:day']);
  const ok = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 's' })]));
  t.equal(ok.status, 200, 'the healthy module serves');
  t.equal(ok.json.results[0].model_set, 'raw_v1');
  // the broken module answers module_unavailable and charges nothing
  const res = await postVerify(server.baseUrl, token, 'color_liveness', request([single({ id: 'x' })]));
  t.equal(res.status, 503);
  t.equal(res.json.error.code, 'module_unavailable');
  const me = await (await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).json();
  t.match(me.usage.find((u: any) => u.module_id === 'color_liveness'), { used: 0 });
});
