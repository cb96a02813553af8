// Used by webgpu-compare.child.ts: starts the engine with `auto` and with `webgpu` on a
// tiny graph set and returns what each chose and what readiness says; then `auto` once more
// with the emulated adapter presented as hardware (`gpu_auto`), so that its measurement of
// WebGPU against the CPU backends runs where no GPU exists; and that measurement alone with
// the CPU backends on 2 threads a session (`two_threads`).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInferenceEngine, loadManifest } from '../../src/inference/index.ts';
import { measureBackends } from '../../src/inference/backend-probe.ts';
import { webGpuAdapter } from '../../src/inference/runtime.ts';
import { brightnessGraph } from './test-graphs.ts';
import { capture } from './helpers.ts';

export async function engineChoices(lap: (what: string) => void = () => {}): Promise<Record<string, unknown>> {
  const root = mkdtempSync(join(tmpdir(), 'models-gpu-'));
  const dir = join(root, 'tiny_v1');
  mkdirSync(dir);
  writeFileSync(join(dir, 'tiny.onnx'), brightnessGraph('logit', 16, 8, 0.5));
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify({
    format: 'liveness-model-set/1', model_set: 'tiny_v1', trained: true,
    modules: { rgb_liveness: {
      graphs: [{ role: 'frame', file: 'tiny.onnx', input: 'input', output: 'score', output_kind: 'logit', layout: 'NCHW', dtype: 'float32', batch: 'dynamic', crop_fraction: 1, size: 16, channel_order: 'RGB', scale: 1 / 255, mean: [0, 0, 0], std: [1, 1, 1] }],
      modes: { rgb_single: { decision_policy: 'single_frame_v1', threshold: 0.5 } },
    } },
  }));
  const out: Record<string, unknown> = {};
  try {
    const asHardware = async () => {
      const found = await webGpuAdapter();
      return found && { ...found, fallback: false };
    };
    for (const [name, backend, findAdapter] of [['auto', 'auto', undefined], ['webgpu', 'webgpu', undefined], ['gpu_auto', 'auto', asHardware]] as const) {
      const logs: string[] = [];
      const records: { msg: string; obj: object }[] = [];
      const engine = createInferenceEngine({
        modelsDir: root, modelSet: 'tiny_v1', backend, threads: 1, warmupRuns: 1, enabledModules: ['rgb_liveness'], findAdapter,
        log: (obj, msg) => (logs.push(msg), records.push({ msg, obj })),
      });
      await engine.start();
      const [r] = await engine.infer({ module_id: 'rgb_liveness', captures: [capture('g', 'rgb_single', [{ seed: 3 }])] });
      out[name] = { provider: engine.executionProvider, readiness: engine.readiness()[0], logs, records, score: r!.score };
      await engine.close();
      lap(`engine ${name}`);
    }
    // auto on a host of 16 cores or more gives the CPU backends' sessions 2 threads; WebGPU
    // must still load there (it failed to, with "fetch failed", on an H100's 16 cores)
    out.two_threads = await measureBackends({ manifest: loadManifest(dir), modules: ['rgb_liveness'], threads: 2, candidates: ['wasm', 'webgpu'], warmupRuns: 1, rounds: 1, callsPerRound: 1 });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  return out;
}
