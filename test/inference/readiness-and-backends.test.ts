import { join } from 'node:path';
import t from 'tap';
import { createInferenceEngine, poolShape, type ModuleReadiness } from '../../src/inference/index.ts';
import { webGpuAdapterName } from '../../src/inference/runtime.ts';
import { capture } from './helpers.ts';
import { waitFor } from '../helpers/wait.ts';

const MODELS = join(import.meta.dirname, '../../models');

t.test('modules are not ready until their graphs are loaded and warm', async (t) => {
  const seen: string[] = [];
  const engine = createInferenceEngine({
    modelsDir: MODELS, modelSet: 'raw_v1', backend: 'wasm', threads: 2, warmupRuns: 3,
    log: (o, msg) => {
      if (msg === 'inference: worker warm') seen.push(`warm ${(o as { module: string }).module}`);
    },
  });
  t.teardown(() => engine.close());
  // what the main thread pushes to the API workers
  const heard: ModuleReadiness[][] = [];
  engine.onReadinessChange((modules) => heard.push(modules));
  t.same(engine.readiness().map((r) => r.ready), [false, false], 'not ready before start');
  await t.rejects(engine.infer({ module_id: 'rgb_liveness', captures: [] }), /not started/);
  const started = engine.start();
  t.same(engine.readiness().map((r) => r.ready), [false, false], 'not ready while loading');
  // Poll: a module may only turn ready after both workers reported it warm.
  const warmCount = (id: string) => seen.filter((m) => m === `warm ${id}`).length;
  let early = 0;
  await waitFor(() => {
    for (const r of engine.readiness()) if (r.ready && warmCount(r.module_id) < 2) early++;
    return engine.readiness().every((r) => r.ready);
  }, { timeoutMs: 120_000, intervalMs: 10, what: 'both modules ready' });
  t.equal(early, 0, 'never ready before every worker is warm');
  t.equal(warmCount('rgb_liveness') + warmCount('color_liveness'), 4, 'two workers x two modules warmed');
  await started;
  const [rgb, colour] = engine.readiness();
  t.match(rgb, { module_id: 'rgb_liveness', ready: true, model_set: 'raw_v1', decision_policy: 'single_frame_v1', threshold: 0.5, execution_provider: 'wasm', error: null });
  t.match(colour, { module_id: 'color_liveness', ready: true, decision_policy: 'color_fusion_v1' });
  t.same(rgb.modes?.map((m) => m.decision_policy), ['single_frame_v1', 'temporal_head_v1']);

  // readiness is an event: each change is heard once, as it happens, the last being the present
  t.same(heard.at(-1), engine.readiness(), 'turning ready was heard');
  t.equal(heard[0]![0]!.execution_provider, 'wasm', 'the provider being chosen was heard, before any module turned ready');
  t.same(heard[0]!.map((r) => r.ready), [false, false]);
  t.ok(heard.every((m, i) => i === 0 || JSON.stringify(m) !== JSON.stringify(heard[i - 1])), 'no change heard twice');
  await engine.close();
  t.same(heard.at(-1)!.map((r) => r.ready), [false, false], 'closing is heard: nothing is ready on a closed engine');
});

t.test('WebGPU requested without an adapter falls back to WASM; undescribed modules are reported', async (t) => {
  const adapter = await webGpuAdapterName();
  const logs: string[] = [];
  const engine = createInferenceEngine({
    modelsDir: MODELS, modelSet: 'bgr80_ensemble_v1', backend: 'webgpu', threads: 1, warmupRuns: 1,
    log: (_o, msg) => logs.push(msg),
  });
  t.teardown(() => engine.close());
  await engine.start();
  const [rgb, colour] = engine.readiness();
  if (adapter) {
    t.pass('this machine has a WebGPU adapter: the fallback is not exercised here');
  } else {
    t.equal(engine.executionProvider, 'wasm');
    t.equal(rgb.execution_provider, 'wasm');
    t.ok(logs.includes('inference: no WebGPU adapter, falling back to WASM'));
    // the log line alone left operators of GPU hosts without the Vulkan libraries unaware
    t.match(rgb.execution_note, /^WebGPU unavailable: .*Dawn found no adapter, so the engine serves on WASM\. .*libvulkan1, libglvnd0, libgl1, libglx0, libegl1, libgles2, libopengl0.*docs\/gpu\.md/);
  }
  t.equal(rgb.ready, true);
  const [r] = await engine.infer({ module_id: 'rgb_liveness', captures: [capture('w', 'rgb_single', [{}])] });
  t.equal(r.status, 'ok');
  // bgr80_ensemble_v1 has no color_liveness: enabled by default, reported, never served.
  t.equal(colour.ready, false);
  t.match(colour.error, /bgr80_ensemble_v1 does not describe color_liveness/);
  await t.rejects(
    engine.infer({ module_id: 'color_liveness', captures: [capture('c', 'color', [{}, {}, {}, {}])] }),
    /color_liveness is not available/,
  );
});

t.test('the pool is sized from the inference threads, not from requests', async (t) => {
  t.same(poolShape(1, 'wasm'), { workers: 1, sessionThreads: 1 });
  t.same(poolShape(2, 'wasm'), { workers: 2, sessionThreads: 1 });
  t.same(poolShape(16, 'native'), { workers: 8, sessionThreads: 2 });
  t.same(poolShape(0, 'wasm'), { workers: 1, sessionThreads: 1 });
  t.same(poolShape(8, 'webgpu'), { workers: 1, sessionThreads: 1 });
});

t.test('a bad manifest fails createInferenceEngine with the field named', async (t) => {
  t.throws(
    () => createInferenceEngine({ modelsDir: MODELS, modelSet: 'no_such_set', backend: 'wasm', threads: 1 }),
    { message: /^manifest\.json: cannot be read/ },
  );
});
