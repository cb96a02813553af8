// Run by webgpu-swiftshader.test.ts in a child process, because the Vulkan loader's path
// (LD_LIBRARY_PATH) is read when a process starts. Runs every graph of every shipped model
// set (models/*/manifest.json) on WASM and on WebGPU through the service's runtime, on the
// same seeded input, then starts the engine with `auto` and with `webgpu` on a tiny test
// graph, and prints every output, choice and readiness as JSON. One process for all: each
// first WebGPU session compiles onnxruntime-web's WebGPU build, minutes on a loaded machine.
// The engine checks' threads (the pools', `auto`'s measurement threads: about ten) run their
// compiled bundles when dist/ matches the sources, by the rule the test harness follows for
// every engine it starts (bench/harness/from-build.ts), instead of tsx compiling the sources
// again in each (issue 43). The graph comparisons run on this thread, from the sources, either way.
import '../../bench/harness/from-build.ts';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createRuntime, webGpuAdapter, type Feed } from '../../src/inference/runtime.ts';
import { loadManifest } from '../../src/inference/manifest.ts';
import { webGpuProvider } from '../../src/inference/webgpu-layout.ts';
import { engineChoices } from './webgpu-engine.ts';

const MODELS = join(import.meta.dirname, '../../models');

/** Values in [-2, 2): the range the manifests' normalisation gives pixels, and wide enough
 * that a misread input channel moves the output well past float rounding. */
function input(type: string, dims: number[], seed: number): Feed {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = type === 'uint8' ? new Uint8Array(n) : new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = type === 'uint8' ? s >>> 24 : ((s >>> 8) / 2 ** 24 - 0.5) * 4;
  }
  return { data, dims };
}

const T0 = performance.now();
const cpuMs = () => {
  const u = process.cpuUsage();
  return Math.round((u.user + u.system) / 1000);
};
// wall and CPU ms since the start (SwiftShader compiles and runs on several threads)
const lap = (what: string) => process.stderr.write(`${what} ${Math.round(performance.now() - T0)} ms (${cpuMs()} CPU-ms)\n`);
const adapter = await webGpuAdapter();
lap('adapter');
const wasm = await createRuntime('wasm', 1);
const gpu = await createRuntime('webgpu', 1);
lap('runtimes');
const graphs: Record<string, unknown> = {};
const sets = readdirSync(MODELS).filter((d) => existsSync(join(MODELS, d, 'manifest.json'))).sort();
for (const set of sets) {
  const manifest = loadManifest(join(MODELS, set));
  for (const [module, mod] of Object.entries(manifest.modules)) {
    for (const spec of mod.graphs) {
      const file = `${set}/${spec.file}`;
      const model = readFileSync(join(MODELS, file));
      const results: Record<string, unknown> = { module, role: spec.role, layout: webGpuProvider(model).preferredLayout ?? 'NHWC' };
      let feeds: Record<string, Feed> | null = null;
      for (const [name, runtime] of [['wasm', wasm], ['webgpu', gpu]] as const) {
        const session = await runtime.createSession(model);
        if (!feeds) {
          // symbolic dimensions: a batch of 2 (dynamic-batch graphs run batched in service),
          // 5 frames for the temporal head
          const declared = session.input(spec.input)!;
          const dims = declared.shape.map((d, i) => (typeof d === 'number' && d > 0 ? d : i === 0 ? 2 : 5));
          feeds = { [spec.input]: input(declared.type, dims, 7) };
          results.input = dims;
        }
        const t0 = performance.now();
        const r = await session.run(feeds, [...session.outputNames]);
        results[name] = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Array.from(v.data)]));
        results[`${name}_ms`] = performance.now() - t0;
        await session.release();
      }
      lap(file);
      graphs[file] = results;
    }
  }
}
const engine = await engineChoices(lap);
lap('engine');
process.stdout.write(`${JSON.stringify({ adapter, graphs, engine })}\n`);
process.exit(0);
