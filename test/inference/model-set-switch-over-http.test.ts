import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import { waitFor } from '../helpers/wait.ts';
import { client, login } from '../auth/session-client.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, runCli, tempDir } from '../helpers/server.ts';

// An operator switches the served model set while the service serves, by the CLI and by the
// admin API. The service's app and engine in process (test/helpers/api.ts: the real engine
// hears the CLI's and the admin API's requests as a main thread does, and pushes readiness to
// the API worker; issue 43: this was a server start). That the switch reaches every API worker
// of a real process at once is test/inference/readme-deploy-path.test.ts's, on its restarted
// server of two API workers.

const MODELS = join(import.meta.dirname, '../../models');

t.test('an operator switches the served model set live (CLI and admin API); a failing set is refused', async (t) => {
  const root = tempDir('models-');
  for (const set of ['raw_v1', 'bgr80_ensemble_v1']) cpSync(join(MODELS, set), join(root, set), { recursive: true });
  cpSync(join(MODELS, 'bgr80_ensemble_v1'), join(root, 'broken_v1'), { recursive: true });
  const file = join(root, 'broken_v1', 'manifest.json');
  const m = JSON.parse(readFileSync(file, 'utf8'));
  m.model_set = 'broken_v1';
  m.modules.rgb_liveness.graphs[1].live_index = 5;
  writeFileSync(file, JSON.stringify(m));
  // raw_v1 under another name, for the admin API to switch to from raw_v1
  cpSync(join(MODELS, 'raw_v1'), join(root, 'raw_copy'), { recursive: true });
  const copy = join(root, 'raw_copy', 'manifest.json');
  writeFileSync(copy, JSON.stringify({ ...JSON.parse(readFileSync(copy, 'utf8')), model_set: 'raw_copy' }));

  // bgr80 has no colour module: disabled first, so the service can turn ready on it
  const dataDir = tempDir();
  const env = { MODELS_DIR: root, MODEL_SET: 'bgr80_ensemble_v1', INFERENCE_BACKEND: 'wasm', ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery' };
  t.equal((await runCli(dataDir, ['module', 'disable', 'color_liveness'], '', env)).code, 0);
  const server = await startApi({ dataDir, engine: 'real', ready: true, env });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:100:day']);
  /** /health/ready as the API worker has it, asked once on a connection of its own: readiness
   * is pushed to the API worker at the switch, before the engine writes the answer that the
   * CLI and the admin API read, so once they report the switch it may not name the old set. */
  const readiness = () =>
    new Promise<{ ready: boolean; model_set: string }>((resolve, reject) => {
      get(`${server.baseUrl}/health/ready`, { agent: false }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve(JSON.parse(text).modules.rgb_liveness)).on('error', reject);
      }).on('error', reject);
    });
  const served = async (id: string) => {
    const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id })]));
    t.equal(r.status, 200, r.text);
    return r.json.results[0].model_set as string;
  };
  t.equal(await served('before'), 'bgr80_ensemble_v1');
  const status = await server.cli(['models', 'status']);
  t.match(status.json, { active: 'bgr80_ensemble_v1', activating: null, available: ['bgr80_ensemble_v1', 'broken_v1', 'raw_copy', 'raw_v1'] });

  // CLI: activate and wait for the answer
  const act = await server.cli(['models', 'activate', 'raw_v1', '--wait', '300']);
  t.equal(act.code, 0, act.stderr);
  t.match(act.json, { model_set: 'raw_v1', outcome: 'active', reason: null, active: 'raw_v1' });
  for (let i = 0; i < 4; i++) t.match(await readiness(), { ready: true, model_set: 'raw_v1' }, 'per-module readiness names the new set at once');
  t.equal(await served('after'), 'raw_v1', 'results carry the set that served them');

  // admin API: a set that fails its graph checks is refused; the old set keeps serving
  const session = await login(server.baseUrl, 'root', 'correct horse battery');
  const admin = client(server.baseUrl, session);
  const unknown = await admin('POST', '/admin/api/model-set', { model_set: 'nope' });
  t.equal(unknown.status, 404);
  const bad = await admin('POST', '/admin/api/model-set', { model_set: '../raw_v1' });
  t.equal(bad.status, 422);
  const posted = await admin('POST', '/admin/api/model-set', { model_set: 'broken_v1' });
  t.equal(posted.status, 202, JSON.stringify(posted.json));
  // the model-set state once it answers `requestId` (the admin API answers 202 at once)
  const decided = (requestId: string, what: string) => waitFor(async () => {
    const s = (await admin('GET', '/admin/api/model-set')).json;
    return s.last_request_id === requestId ? s : undefined;
  }, { timeoutMs: 300_000, intervalMs: 100, what });
  const state = await decided(posted.json.request_id, 'the model-set request to be decided');
  t.match(state, { active: 'raw_v1', activating: null, last_request_id: posted.json.request_id, last: { model_set: 'broken_v1', outcome: 'refused', reason: /graphs\[1\]: bgr80_b\.onnx live_index 5 is out of range/ } });
  t.equal(await served('still'), 'raw_v1', 'the refused set never served');
  const refusedCli = await server.cli(['models', 'activate', 'broken_v1', '--wait', '300']);
  t.equal(refusedCli.code, 1, 'the CLI exits 1 on a refusal');
  t.match(refusedCli.json, { outcome: 'refused', active: 'raw_v1' });

  // admin API: a set that passes is switched to, and readiness follows at once
  const back = await admin('POST', '/admin/api/model-set', { model_set: 'raw_copy' });
  t.equal(back.status, 202, JSON.stringify(back.json));
  const switched = await decided(back.json.request_id, 'the admin API activation to be decided');
  t.match(switched, { active: 'raw_copy', activating: null, last: { model_set: 'raw_copy', outcome: 'active', reason: null } });
  for (let i = 0; i < 4; i++) t.match(await readiness(), { ready: true, model_set: 'raw_copy' }, 'readiness names the set the admin API switched to at once');
  t.equal(await served('copy'), 'raw_copy');
  t.match((await server.cli(['models', 'activate', 'nope'])).stderr, /unknown model set nope/);
});
