import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  newActivationRequest, readModelSetState, requestActivation, serveActivationRequests, startupModelSet,
  type Activation, type ModelSetStatus, type ModelSetSwitch,
} from '../../src/inference/index.ts';
import { tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';

// How an activation reaches the main thread: the admin API's as a message (`take`), the CLI's
// through request.json and fs.watch. The switch is a stand-in that answers when told, so the
// order of requests and answers is the test's.

interface Asked {
  model_set: string;
  answer(outcome: Activation['outcome']): void;
}

function fakeSwitch() {
  const asked: Asked[] = [];
  let status: ModelSetStatus = { active: 'raw_v1', activating: null, last: null };
  const sw = {
    status: () => status,
    activate: (modelSet: string) =>
      new Promise<Activation>((resolve) => {
        status = { ...status, activating: modelSet };
        asked.push({
          model_set: modelSet,
          answer(outcome) {
            const last = { model_set: modelSet, outcome, reason: outcome === 'refused' ? 'told to' : null, at: '2026-11-26T12:00:00.000Z' };
            status = { active: outcome === 'active' ? modelSet : status.active, activating: null, last };
            resolve(last);
          },
        });
      }),
  };
  return { sw: sw as unknown as ModelSetSwitch, asked };
}

function modelsDir(): string {
  const root = tempDir('models-');
  for (const set of ['raw_v1', 'bgr80_ensemble_v1']) {
    mkdirSync(join(root, set));
    writeFileSync(join(root, set, 'manifest.json'), '{}');
  }
  return root;
}

const noLog = () => {};
/** longer than any test here: what is heard, is heard through fs.watch or a message */
const NO_RECHECK = 3_600_000;

t.test("the CLI's request is heard through fs.watch, and an activation outlives a restart", async (t) => {
  const dataDir = tempDir();
  const models = modelsDir();
  const { sw, asked } = fakeSwitch();
  const requests = serveActivationRequests(dataDir, models, sw, noLog, { configured: 'raw_v1', recheckMs: NO_RECHECK });
  t.teardown(() => requests.stop());
  t.match(readModelSetState(dataDir), { active: 'raw_v1', activating: null, last_request_id: null, available: ['bgr80_ensemble_v1', 'raw_v1'] });

  const req = requestActivation(dataDir, 'bgr80_ensemble_v1');
  const first = await waitFor(() => asked[0], { what: 'the request file to be heard', timeoutMs: 10_000 });
  t.equal(first.model_set, 'bgr80_ensemble_v1');
  t.match(readModelSetState(dataDir), { activating: 'bgr80_ensemble_v1', last_request_id: null }, 'state.json shows the activation under way');
  first.answer('active');
  const state = await waitFor(() => {
    const s = readModelSetState(dataDir);
    return s?.last_request_id === req.id ? s : undefined;
  }, { what: 'state.json to answer the request' });
  t.match(state, { active: 'bgr80_ensemble_v1', activating: null, last: { model_set: 'bgr80_ensemble_v1', outcome: 'active' } });
  t.match(startupModelSet(dataDir, models, 'raw_v1'), { model_set: 'bgr80_ensemble_v1' }, 'a restart serves the activated set (active.json)');

  // a second request from the CLI replaces the first in request.json: heard too, once
  const again = requestActivation(dataDir, 'raw_v1');
  const second = await waitFor(() => asked[1], { what: 'the second request file to be heard', timeoutMs: 10_000 });
  second.answer('active');
  await waitFor(() => readModelSetState(dataDir)?.last_request_id === again.id, { what: 'the second answer' });
  t.equal(asked.length, 2);
});

t.test('an admin API request arrives as a message; one made while another runs waits, and the newest wins', async (t) => {
  const dataDir = tempDir();
  const models = modelsDir();
  // left from before this start: dropped, never served
  requestActivation(dataDir, 'bgr80_ensemble_v1');
  const { sw, asked } = fakeSwitch();
  const requests = serveActivationRequests(dataDir, models, sw, noLog, { configured: 'raw_v1', recheckMs: NO_RECHECK });
  t.teardown(() => requests.stop());

  const a = newActivationRequest('bgr80_ensemble_v1');
  requests.take(a);
  t.equal(asked.length, 1, 'taken at once, no file or timer between');
  t.equal(asked[0]!.model_set, 'bgr80_ensemble_v1');
  const b = newActivationRequest('raw_v1');
  const c = newActivationRequest('bgr80_ensemble_v1');
  requests.take(b);
  requests.take(c);
  t.equal(asked.length, 1, 'one activation at a time');
  asked[0]!.answer('refused');
  const third = await waitFor(() => asked[1], { what: 'the waiting request to be served' });
  t.equal(third.model_set, 'bgr80_ensemble_v1', 'the newest request waited; the one it replaced never runs');
  t.equal(readModelSetState(dataDir)?.last_request_id, a.id, 'the first is answered in state.json');
  third.answer('active');
  const state = await waitFor(() => {
    const s = readModelSetState(dataDir);
    return s?.last_request_id === c.id ? s : undefined;
  }, { what: 'the newest request to be answered' });
  t.match(state, { active: 'bgr80_ensemble_v1', last: { outcome: 'active' } });
  t.equal(asked.length, 2);
  t.notOk(existsSync(join(dataDir, 'model-set', 'request.json')), 'a message leaves no request file behind');
});

t.test('a state.json that cannot be written is logged, and requests go on being served', async (t) => {
  const dataDir = tempDir();
  const models = modelsDir();
  const { sw, asked } = fakeSwitch();
  const logged: string[] = [];
  const requests = serveActivationRequests(dataDir, models, sw, (_obj, msg) => logged.push(msg), { recheckMs: NO_RECHECK });
  t.teardown(() => requests.stop());
  // a directory where state.json goes: every later write of it fails, as on a full disk
  const state = join(dataDir, 'model-set', 'state.json');
  const { rmSync } = await import('node:fs');
  rmSync(state);
  mkdirSync(state);
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  t.teardown(() => process.off('unhandledRejection', onUnhandled));

  requests.take(newActivationRequest('bgr80_ensemble_v1'));
  await waitFor(() => asked.length === 1, { what: 'the first activation' });
  requests.take(newActivationRequest('raw_v1'));
  asked[0]!.answer('active');
  await waitFor(() => asked.length === 2, { what: 'the next activation, after a failed state write' });
  asked[1]!.answer('active');
  await waitFor(() => logged.filter((m) => /state\.json\) could not be written/.test(m)).length >= 3, { what: 'the failed writes logged' });
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.same(unhandled, [], 'no unhandled rejection');
});
