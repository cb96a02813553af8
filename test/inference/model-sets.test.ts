import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createInferenceEngine, type EngineOptions, type InferenceEngine } from '../../src/inference/index.ts';
import { createModelSetSwitch } from '../../src/inference/model-sets.ts';
import { capture } from './helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const MODELS = join(import.meta.dirname, '../../models');

/** raw_v1 and bgr80_ensemble_v1, plus broken_v1: bgr80 with a live_index its graph lacks. */
function modelsRoot(t: Test): string {
  const root = mkdtempSync(join(tmpdir(), 'models-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  for (const set of ['raw_v1', 'bgr80_ensemble_v1']) cpSync(join(MODELS, set), join(root, set), { recursive: true });
  cpSync(join(MODELS, 'bgr80_ensemble_v1'), join(root, 'broken_v1'), { recursive: true });
  const file = join(root, 'broken_v1', 'manifest.json');
  const m = JSON.parse(readFileSync(file, 'utf8'));
  m.model_set = 'broken_v1';
  m.modules.rgb_liveness.graphs[0].live_index = 3;
  writeFileSync(file, JSON.stringify(m));
  return root;
}

/** Real engines, whose calls can be held in flight per model set after they computed,
 * and whose closing is recorded. */
function gatedFactory() {
  const gates = new Map<string, Promise<void>>();
  const closed: string[] = [];
  const create = (o: EngineOptions): InferenceEngine => {
    const e = createInferenceEngine(o);
    return {
      start: () => e.start(),
      readiness: () => e.readiness(),
      poolTimes: () => e.poolTimes(),
      poolMetrics: () => e.poolMetrics(),
      counters: () => e.counters(),
      ping: () => e.ping(),
      onReadinessChange: (listener) => e.onReadinessChange(listener),
      get executionProvider() {
        return e.executionProvider;
      },
      async infer(job) {
        const r = await e.infer(job);
        await gates.get(o.modelSet);
        return r;
      },
      async close() {
        closed.push(o.modelSet);
        await e.close();
      },
    };
  };
  return { gates, closed, create };
}

const single = (id: string) => ({ module_id: 'rgb_liveness' as const, captures: [capture(id, 'rgb_single', [{ seed: 2 }])] });

t.test('activating another set: atomic switch, in-flight calls finish on the old set, failed sets refused', async (t) => {
  const root = modelsRoot(t);
  const f = gatedFactory();
  const logs: string[] = [];
  const sw = createModelSetSwitch(
    { modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1, enabledModules: ['rgb_liveness'], log: (_o, m) => logs.push(m) },
    { create: f.create, now: () => new Date('2026-11-23T12:00:00Z') },
  );
  t.teardown(() => sw.close());
  await sw.start();
  // what the main thread pushes to the API workers
  const heard: string[] = [];
  sw.onReadinessChange((modules) => heard.push(modules.map((m) => `${m.model_set} ready=${m.ready}`).join()));
  t.match(sw.status(), { active: 'raw_v1', activating: null, last: null });
  const [first] = await sw.infer(single('a'));
  t.equal(first!.model_set, 'raw_v1');

  // a call held in flight on raw_v1 across the switch
  let release!: () => void;
  f.gates.set('raw_v1', new Promise<void>((r) => (release = r)));
  const held = sw.infer(single('held'));
  const activation = sw.activate('bgr80_ensemble_v1');
  t.equal(sw.status().activating, 'bgr80_ensemble_v1', 'loading beside the old set');
  t.equal(sw.readiness()[0]!.model_set, 'raw_v1', 'the old set serves while the new one warms');
  t.same(await activation, { model_set: 'bgr80_ensemble_v1', outcome: 'active', reason: null, at: '2026-11-23T12:00:00.000Z' });
  t.same(heard, ['bgr80_ensemble_v1 ready=true'], 'the switch is heard once, by the time activate() answers; the set warming beside it is not');
  t.match(sw.readiness()[0], { module_id: 'rgb_liveness', ready: true, model_set: 'bgr80_ensemble_v1', error: null });
  const [after] = await sw.infer(single('b'));
  t.equal(after!.model_set, 'bgr80_ensemble_v1', 'new calls go to the new set');
  t.notOk(f.closed.includes('raw_v1'), 'the old set stays open while a call is in flight on it');
  release();
  const [old] = await held;
  t.match(old, { capture_id: 'held', status: 'ok', model_set: 'raw_v1' }, 'the in-flight call finished on the old set');
  t.ok(await waitFor(() => f.closed.includes('raw_v1'), { timeoutMs: 30_000, intervalMs: 1, what: 'the old set to close' }), 'the old set is closed once its last call finished');
  t.same(heard, ['bgr80_ensemble_v1 ready=true'], 'nor is the old set closing');

  // a set that fails its graph checks is refused; the active one keeps serving
  const refused = await sw.activate('broken_v1');
  t.match(refused, { model_set: 'broken_v1', outcome: 'refused', reason: /graphs\[0\]: bgr80_a\.onnx live_index 3 is out of range/ });
  t.match(sw.status(), { active: 'bgr80_ensemble_v1', activating: null, last: { outcome: 'refused' } });
  t.ok(f.closed.includes('broken_v1'), 'the refused engine is closed');
  t.equal((await sw.infer(single('c')))[0]!.model_set, 'bgr80_ensemble_v1');
  t.equal(heard.length, 1, 'a refused set changes nothing anyone hears');
  t.match(await sw.activate('no_such_set'), { outcome: 'refused', reason: /^manifest\.json: cannot be read/ });
  t.match(await sw.activate('bgr80_ensemble_v1'), { outcome: 'unchanged', reason: null });

  // one activation at a time
  const back = sw.activate('raw_v1');
  await t.rejects(sw.activate('raw_v1'), { name: 'ActivationBusyError', message: 'model set raw_v1 is being activated' });
  t.match(await back, { outcome: 'active' });
  t.equal(heard.at(-1), 'raw_v1 ready=true');
  t.equal((await sw.infer(single('d')))[0]!.model_set, 'raw_v1');
  t.ok(logs.includes('model set refused') && logs.includes('model set active'));
});

t.test('a set that would leave a served module unready is refused', async (t) => {
  const root = modelsRoot(t);
  const sw = createModelSetSwitch({ modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 });
  t.teardown(() => sw.close());
  await sw.start();
  const r = await sw.activate('bgr80_ensemble_v1');
  // the remedy that works is named (issue 39: the one documented before changed nothing)
  t.match(r, { outcome: 'refused', reason: /^model set bgr80_ensemble_v1 does not describe color_liveness, which is enabled and served by raw_v1: disable it first \(npm run cli -- module disable color_liveness/ });
  t.same(sw.readiness().map((m) => [m.module_id, m.ready, m.model_set]), [['rgb_liveness', true, 'raw_v1'], ['color_liveness', true, 'raw_v1']]);
});

t.test('while the serving set warms up, a set that would leave its enabled modules unready is refused too', async (t) => {
  const root = modelsRoot(t);
  // raw_v1's start held: it is warming up (nothing ready yet) when the activation comes
  let warmed!: () => void;
  const held = new Promise<void>((r) => (warmed = r));
  const create = (o: EngineOptions): InferenceEngine => {
    const e = createInferenceEngine(o);
    if (o.modelSet !== 'raw_v1') return e;
    return Object.assign(Object.create(e) as InferenceEngine, { start: () => held.then(() => e.start()), close: () => e.close(), readiness: () => e.readiness() });
  };
  const sw = createModelSetSwitch({ modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 }, { create });
  t.teardown(() => sw.close());
  const started = sw.start();
  t.same(sw.readiness().map((m) => m.ready), [false, false], 'warming up');
  const r = await sw.activate('bgr80_ensemble_v1');
  t.match(r, { outcome: 'refused', reason: /^model set bgr80_ensemble_v1 does not describe color_liveness, which is enabled and served by raw_v1/ },
    'it was switched to: nothing being ready, nothing counted as lost, and color_liveness stayed unready for good');
  t.match(sw.status(), { active: 'raw_v1' });
  warmed();
  await started;
  t.same(sw.readiness().map((m) => [m.module_id, m.ready, m.model_set]), [['rgb_liveness', true, 'raw_v1'], ['color_liveness', true, 'raw_v1']], 'the serving set came up');
});

t.test('REQUIRE_TRAINED_MODELS: an untrained set is never switched to, whatever is enabled; a trained one is', async (t) => {
  const root = modelsRoot(t);
  for (const [from, to, trained] of [['raw_v1', 'trained_v1', true], ['bgr80_ensemble_v1', 'rgb_trained_v1', true]] as const) {
    cpSync(join(root, from), join(root, to), { recursive: true });
    const file = join(root, to, 'manifest.json');
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), model_set: to, trained }));
  }
  const enabled = new Set(['rgb_liveness']);
  const sw = createModelSetSwitch({ modelsDir: root, modelSet: 'trained_v1', backend: 'wasm', threads: 1, warmupRuns: 1, requireTrained: true }, { moduleEnabled: (id) => enabled.has(id) });
  t.teardown(() => sw.close());
  await sw.start();
  t.match(await sw.activate('bgr80_ensemble_v1'), { outcome: 'refused', reason: 'model set bgr80_ensemble_v1 is untrained (its manifest says trained: false) and REQUIRE_TRAINED_MODELS is set: it cannot be switched to' },
    'refused, where it was switched to (its rgb module unready, color disabled: nothing "lost")');
  enabled.clear();
  t.match(await sw.activate('raw_v1'), { outcome: 'refused', reason: /is untrained/ }, 'with no module enabled too');
  t.match(sw.status(), { active: 'trained_v1' });
  enabled.add('rgb_liveness');
  t.match(await sw.activate('rgb_trained_v1'), { outcome: 'active' }, 'a trained set is switched to');
});

t.test('a module the operator disabled does not hold an activation back', async (t) => {
  const root = modelsRoot(t);
  const enabled = new Set(['rgb_liveness', 'color_liveness']);
  const sw = createModelSetSwitch({ modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 }, { moduleEnabled: (id) => enabled.has(id) });
  t.teardown(() => sw.close());
  await sw.start();
  enabled.delete('color_liveness');
  const r = await sw.activate('bgr80_ensemble_v1');
  t.match(r, { outcome: 'active', model_set: 'bgr80_ensemble_v1' }, 'raw_v1 serves color_liveness ready, but it is disabled');
  t.same(sw.readiness().map((m) => [m.module_id, m.ready, m.model_set]), [['rgb_liveness', true, 'bgr80_ensemble_v1'], ['color_liveness', false, 'bgr80_ensemble_v1']]);
  // a store that cannot answer counts the module as enabled: the careful side
  const back = createModelSetSwitch({ modelsDir: root, modelSet: 'raw_v1', backend: 'wasm', threads: 1, warmupRuns: 1 }, { moduleEnabled: () => Promise.reject(new Error('store down')) });
  t.teardown(() => back.close());
  await back.start();
  t.match(await back.activate('bgr80_ensemble_v1'), { outcome: 'refused', reason: /does not describe color_liveness/ });
});

// The load bound (loadTimeoutMs, MODEL_LOAD_TIMEOUT_SECONDS) on the switch's own terms: engines
// whose start never settles (stuck_*) or settles at once (good_*), so that the bound, and nothing
// of a host's speed, decides each outcome (a start that settled is seen before any timer fires).
// The service's refusals of a real too-slow WASM graph, at start and on activation, through
// its API and CLI: model-load-timeout.test.ts. Held here since issue 43: that an activation
// still switches after a refusal at start (issue 40 finding 6: the never-ending start wedged
// model switching), which that file showed on a server start of its own, waiting out 20 s.
t.test('a set whose start overruns the load bound is refused, at start and on activation; activations after either still switch', async (t) => {
  const closed: string[] = [];
  const logs: string[] = [];
  const create = (o: EngineOptions): InferenceEngine => {
    let started = false;
    const readiness = () => [{ module_id: 'rgb_liveness' as const, ready: started, model_set: o.modelSet, trained: true, decision_policy: 'single_frame_v1', threshold: 0.5, execution_provider: 'wasm' as const, error: null }];
    return {
      start: () => (o.modelSet.startsWith('stuck') ? new Promise<void>(() => {}) : Promise.resolve().then(() => void (started = true))),
      readiness,
      poolTimes: () => null,
      poolMetrics: () => [],
      counters: () => ({ tasks: 0, captures: 0 }),
      ping: () => Promise.resolve(),
      onReadinessChange: () => () => {},
      executionProvider: 'wasm',
      infer: (job) => Promise.resolve(job.captures.map(() => ({ model_set: o.modelSet }) as unknown as Awaited<ReturnType<InferenceEngine['infer']>>[number])),
      close: async () => void closed.push(o.modelSet),
    };
  };
  const sw = createModelSetSwitch(
    { modelsDir: 'unused', modelSet: 'stuck_v1', backend: 'wasm', threads: 1, warmupRuns: 1, log: (_o, m) => logs.push(m) },
    { create, loadTimeoutMs: 100 },
  );
  t.teardown(() => sw.close());
  await t.rejects(sw.start(), { name: 'LoadTimeoutError', message: /did not finish within 0\.1 s \(MODEL_LOAD_TIMEOUT_SECONDS\)/ }, 'the start is refused at the bound');
  t.match(sw.readiness(), [{ module_id: 'rgb_liveness', ready: false, model_set: 'stuck_v1', error: /^model set stuck_v1: load, graph checks and warm-up did not finish within/ }], 'its modules stay unready and say why');
  t.ok(logs.includes('model set refused at start: its modules stay unready'), 'logged');
  await waitFor(() => closed.includes('stuck_v1'), { what: 'the refused engine closed', timeoutMs: 30_000, intervalMs: 1 });

  t.match(await sw.activate('good_v1'), { model_set: 'good_v1', outcome: 'active', reason: null }, 'an activation after the refusal at start switches');
  t.match(sw.readiness(), [{ ready: true, model_set: 'good_v1', error: null }], 'and the refusal\'s reason is gone');
  t.equal((await sw.infer(single('a')))[0]!.model_set, 'good_v1');

  t.match(await sw.activate('stuck_v2'), { model_set: 'stuck_v2', outcome: 'refused', reason: /did not finish within 0\.1 s/ }, 'beside a serving set: refused at the bound');
  t.match(sw.status(), { active: 'good_v1', activating: null, last: { outcome: 'refused' } }, 'the serving set stays');
  t.equal((await sw.infer(single('b')))[0]!.model_set, 'good_v1');
  t.match(await sw.activate('good_v2'), { outcome: 'active', model_set: 'good_v2' }, 'the next activation is not held up by it');
  await waitFor(() => closed.includes('stuck_v2'), { what: 'the refused engine closed', timeoutMs: 30_000, intervalMs: 1 });
});
