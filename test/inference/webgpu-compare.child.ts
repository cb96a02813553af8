// Run by webgpu-swiftshader.test.ts in a child process, because the Vulkan loader's path
// (LD_LIBRARY_PATH) is read when a process starts. Runs every graph of every shipped model
// set (models/*/manifest.json) on WASM and on WebGPU through the service's runtime, on the
// same seeded input (a graph whose kernels an earlier one already ran, kernelSignature, is
// listed with `twin_of` instead), then starts the engine with `auto` and with `webgpu` on a tiny test
// graph, and prints every output, choice and readiness as JSON. One process for all: each
// first WebGPU session compiles onnxruntime-web's WebGPU build, minutes on a loaded machine.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { createRuntime, webGpuAdapter, type Feed } from '../../src/inference/runtime.ts';
import { loadManifest } from '../../src/inference/manifest.ts';
import { webGpuProvider } from '../../src/inference/webgpu-layout.ts';
import { fields, varintAt } from '../../src/inference/protobuf-fields.ts';
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

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/**
 * What selects onnxruntime-web's WebGPU kernels for a graph: its nodes in order (inputs,
 * outputs, op type, attributes), its inputs and outputs as declared, and the dims of every
 * initialiser, each dim that is a multiple of 4 written as `4n`. The provider picks its code
 * by shape classes, not sizes: the vectorised Conv/MatMul kernels by channel counts being
 * multiples of 4 (conv2d_mm_webgpu.cc is_vec4), the misread of webgpu-layout.ts by a multiple
 * of 3 (those dims stay exact). Two graphs with one signature run the same kernels with other
 * channel counts: bgr80_ensemble_v1's two members (bgr80Graph, widths 8 and 12). Comparing
 * the second one again cost ~10 s of shader compilation on SwiftShader and tested no other code.
 */
/**
 * The twins that were checked by hand against onnxruntime-web's kernel selection, by the
 * sha-256 of each file: the signature's `4n` merges shape classes the provider does tell apart
 * elsewhere (Gemm's small-matrix program when M, N and K are all <= 8; 1x1 Conv and MatMul when
 * N and K are < 8; conv2d_mm's tile fit by sizes modulo 32), so a signature match alone is not
 * proof. bgr80_a (width 8) and bgr80_b (width 12): Gemm K 16 / 24, both the packed program;
 * Conv input channels 3/8/16 against 3/12/24, the same vectorised paths; no size a multiple of
 * 32. A replaced graph, or any other match, is compared in full.
 */
const REVIEWED_TWINS = new Map([
  // bgr80_ensemble_v1/bgr80_b.onnx -> bgr80_ensemble_v1/bgr80_a.onnx
  ['a99b77556b348ff8c4553e81d7f30f369b914114e9c667822215d3bab6e3ddc0', 'b5c99abc6963f46f5fd580eaa60e9431737f346c2ef8e563f077516a9b49d0b4'],
]);
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

function kernelSignature(model: Uint8Array): string {
  const parts: string[] = [];
  const vec = (d: number) => (d > 0 && d % 4 === 0 ? '4n' : String(d));
  for (const m of fields(model)) {
    if (m.no !== 7 || !m.bytes) continue; // ModelProto.graph
    for (const f of fields(m.bytes)) {
      if (f.no === 1 && f.bytes) { // NodeProto
        const node: string[] = [];
        for (const n of fields(f.bytes)) {
          if (n.no === 1 && n.bytes) node.push(`in ${text(n.bytes)}`);
          else if (n.no === 2 && n.bytes) node.push(`out ${text(n.bytes)}`);
          else if (n.no === 4 && n.bytes) node.push(`op ${text(n.bytes)}`);
          else if (n.no === 5 && n.bytes) node.push(`attr ${hex(n.bytes)}`);
          else if (n.no !== 3) node.push(`field ${n.no} ${n.bytes ? hex(n.bytes) : n.varint}`); // anything else: exact
        }
        parts.push(node.join(' '));
      } else if (f.no === 5 && f.bytes) { // TensorProto: name (8), dims (1, packed or not)
        const dims: number[] = [];
        let name = '';
        for (const x of fields(f.bytes)) {
          if (x.no === 1 && x.varint !== undefined) dims.push(x.varint);
          else if (x.no === 1 && x.bytes) {
            for (let i = 0; i < x.bytes.length;) {
              const [v, next] = varintAt(x.bytes, i);
              dims.push(v);
              i = next;
            }
          } else if (x.no === 8 && x.bytes) name = text(x.bytes);
        }
        parts.push(`init ${name} [${dims.map(vec).join(',')}]`);
      } else if (f.no === 11 || f.no === 12) { // inputs and outputs, exact
        parts.push(`io ${f.bytes ? hex(f.bytes) : f.varint}`);
      } else if (f.no !== 2 && f.no !== 10) { // not the graph's name or doc string: exact
        parts.push(`graph ${f.no} ${f.bytes ? hex(f.bytes) : f.varint}`);
      }
    }
  }
  return parts.join('\n');
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
const compared = new Map<string, string>(); // kernel signature -> the graph compared with it
const hashOf = new Map<string, string>(); // a compared graph -> its file's sha-256
const sets = readdirSync(MODELS).filter((d) => existsSync(join(MODELS, d, 'manifest.json'))).sort();
for (const set of sets) {
  const manifest = loadManifest(join(MODELS, set));
  for (const [module, mod] of Object.entries(manifest.modules)) {
    for (const spec of mod.graphs) {
      const file = `${set}/${spec.file}`;
      const model = readFileSync(join(MODELS, file));
      const results: Record<string, unknown> = { module, role: spec.role, layout: webGpuProvider(model).preferredLayout ?? 'NHWC' };
      const signature = kernelSignature(model);
      const twin = compared.get(signature);
      // a twin only where this very pair was reviewed (REVIEWED_TWINS); any other match runs
      if (twin && REVIEWED_TWINS.get(sha256(model)) === hashOf.get(twin)) {
        graphs[file] = { ...results, twin_of: twin };
        lap(`${file} (same kernels as ${twin})`);
        continue;
      }
      if (!compared.has(signature)) compared.set(signature, file);
      hashOf.set(file, sha256(model));
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
