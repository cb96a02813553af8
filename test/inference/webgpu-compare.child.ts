// Run by webgpu-swiftshader.test.ts in a child process, because the Vulkan loader's path
// (LD_LIBRARY_PATH) is read when a process starts. Loads the named shipped graphs on WASM
// and on WebGPU through the service's runtime, then starts the engine with `auto` and with
// `webgpu` on a tiny test graph, and prints every output, choice and readiness as JSON.
// One process for both: each first WebGPU session compiles onnxruntime-web's WebGPU build,
// minutes on a loaded machine.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRuntime, webGpuAdapter, type Feed } from '../../src/inference/runtime.ts';
import { engineChoices } from './webgpu-engine.ts';

const MODELS = join(import.meta.dirname, '../../models');
const graphs = process.argv.slice(2);

function input(dims: number[], seed: number): Feed {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = (s >>> 8) / 2 ** 24 - 0.5;
  }
  return { data, dims };
}

const T0 = performance.now();
const lap = (what: string) => process.stderr.write(`${what} ${Math.round(performance.now() - T0)} ms\n`);
const adapter = await webGpuAdapter();
const wasm = await createRuntime('wasm', 1);
const gpu = await createRuntime('webgpu', 1);
const out: Record<string, unknown> = { adapter };
for (const spec of graphs) {
  const [file, inputName, dimText] = spec.split(':') as [string, string, string];
  const dims = dimText.split('x').map(Number);
  const model = readFileSync(join(MODELS, file));
  const feeds = { [inputName]: input(dims, 7) };
  const results: Record<string, Record<string, number[]>> = {};
  for (const [name, runtime] of [['wasm', wasm], ['webgpu', gpu]] as const) {
    const session = await runtime.createSession(model);
    lap(`${name} session`);
    const t0 = performance.now();
    const r = await session.run(feeds, [...session.outputNames]);
    results[name] = Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Array.from(v.data)]));
    results[`${name}_ms`] = { ms: [performance.now() - t0] };
    lap(`${name} run`);
    await session.release();
  }
  out[file] = results;
}
out.engine = await engineChoices();
lap('engine');
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
