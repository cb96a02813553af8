// The WebGPU path on a real (if emulated) adapter: Debian's chromium ships SwiftShader, a
// Vulkan driver that runs on the CPU, and Dawn finds it when VK_ICD_FILENAMES names its
// manifest. Slow (shaders compile for about a minute, then ~1.5 s a frame), so each shipped
// graph runs once, at its smallest input (every graph of every set: two graphs built alike at
// other sizes may still meet other kernels), and the engine's adapter choice uses a tiny test
// graph.
import { join } from 'node:path';
import t from 'tap';
import { copySharedUploads } from '../../src/inference/runtime.ts';
import { runChild } from '../helpers/server.ts';
import { NO_ICD, swiftShaderEnv, swiftShaderIcd } from './swiftshader.ts';
import { missingTool } from '../helpers/required.ts';

const ROOT = join(import.meta.dirname, '../..');
// Shader compilation on an emulated GPU takes minutes on a loaded machine; the file's
// limit is raised for it alone (tap passes this to its runner).
t.setTimeout(20 * 60_000);

/** A child script of this folder, run with tsx on SwiftShader's Vulkan driver. */
function runScript(script: string, args: string[], icd: string) {
  return runChild(process.execPath, ['--import', 'tsx', join(import.meta.dirname, script), ...args], { cwd: ROOT, env: { ...process.env, ...swiftShaderEnv(icd) } });
}

t.test('SharedArrayBuffer views are copied before GPUQueue.writeBuffer', async (t) => {
  // Dawn's binding rejects shared sources; this stand-in does the same
  class Queue {
    got: { data: unknown; rest: unknown[] } | null = null;
    writeBuffer(_buffer: unknown, _offset: number, data: ArrayBufferView | ArrayBufferLike, ...rest: unknown[]) {
      const shared = data instanceof SharedArrayBuffer || (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer);
      if (shared) throw new Error('Invalid argument');
      this.got = { data, rest };
    }
  }
  const q = new Queue();
  const sab = new SharedArrayBuffer(64);
  const view = new Float32Array(sab, 8, 4);
  view.set([1.5, -2, 3.25, 4]);
  t.throws(() => q.writeBuffer(null, 0, view), /Invalid argument/, 'the failure as onnxruntime-web meets it');
  copySharedUploads({ GPUQueue: Queue });
  copySharedUploads({ GPUQueue: Queue }); // once only
  q.writeBuffer(null, 0, view, 1, 2);
  const sent = q.got!.data as Float32Array;
  t.ok(sent instanceof Float32Array && !(sent.buffer instanceof SharedArrayBuffer), 'a plain Float32Array');
  t.same(Array.from(sent), [1.5, -2, 3.25, 4]);
  t.same(q.got!.rest, [1, 2], 'dataOffset and size (in elements) passed unchanged');
  q.writeBuffer(null, 0, sab);
  t.ok(q.got!.data instanceof ArrayBuffer && (q.got!.data as ArrayBuffer).byteLength === 64);
  const plain = new Uint8Array(4);
  q.writeBuffer(null, 0, plain);
  t.equal(q.got!.data, plain, 'an unshared source is passed as is, not copied');
});

const icd = swiftShaderIcd();

/**
 * Every output of every shipped graph must agree between WebGPU and WASM to within
 * TOLERANCE of its magnitude (at least 1). Float rounding in a different summation order
 * stays near 1e-6 (the RGB frame graph: 2.8e-7 on an H100); the misread 9-channel Conv
 * (webgpu-layout.ts) put the first Conv's outputs up to 2.0 off and moved the colour
 * difference logit by 0.126 on this test's input (-0.0231 on WASM, 0.1030 on WebGPU) and
 * by 0.185 on a real capture, over 1,000 times this bound.
 */
const TOLERANCE = 1e-4;

t.test('WebGPU on SwiftShader gives the WASM outputs for every graph of every shipped model set; auto skips the fallback adapter', async (t) => {
  if (!icd) return missingTool(t, NO_ICD);
  const cmp = await runScript('webgpu-compare.child.ts', [], icd);
  t.equal(cmp.code, 0, cmp.stderr);
  // where the time went: the child's laps (ms since it started)
  t.comment(cmp.stderr.trim().split('\n').join('; '));
  const out = JSON.parse(cmp.stdout);
  t.match(out.adapter, { fallback: true }, `Dawn found ${out.adapter?.name}`);
  const files = Object.keys(out.graphs);
  // every module of every set: a graph left out of the comparison is how the colour
  // branch's wrong answer went unseen
  t.ok(['raw_v1/color_difference.onnx', 'raw_v1/color_appearance.onnx', 'raw_v1/temporal_head.onnx', 'raw_v1/rgb_frame.onnx', 'bgr80_ensemble_v1/bgr80_a.onnx', 'bgr80_ensemble_v1/bgr80_b.onnx'].every((f) => files.includes(f)), `compared: ${files.join(', ')}`);
  for (const file of files) {
    const g = out.graphs[file];
    t.same(Object.keys(g.webgpu), Object.keys(g.wasm), `${file}: the same outputs`);
    for (const name of Object.keys(g.wasm)) {
      const a: number[] = g.wasm[name];
      const b: number[] = g.webgpu[name];
      t.equal(b.length, a.length);
      const worst = Math.max(...a.map((v, i) => Math.abs(v - b[i]!) / Math.max(1, Math.abs(v))));
      const shown = a.length <= 4 ? ` (WASM ${a.join(', ')}; WebGPU ${b.join(', ')})` : '';
      t.ok(worst <= TOLERANCE, `${file} ${name} [${g.module}, ${g.role}, ${g.layout}]: largest relative difference ${worst.toExponential(2)}${shown}`);
    }
  }

  const e = out.engine;
  t.not(e.auto.provider, 'webgpu', 'auto does not serve on a CPU emulation');
  t.ok(e.auto.logs.includes('inference: only a fallback WebGPU adapter (CPU emulation), measuring the CPU backends'));
  t.notOk('execution_note' in e.auto.readiness);
  t.equal(e.webgpu.provider, 'webgpu', 'an explicit webgpu may use it');
  t.match(e.webgpu.readiness, { ready: true, execution_provider: 'webgpu', execution_note: /fallback adapter \(.+\): a CPU emulation/ });
  t.ok(Math.abs(e.webgpu.score - e.auto.score) <= 1e-4, `served score on WebGPU ${e.webgpu.score} vs ${e.auto.provider} ${e.auto.score}`);

  // issue 28: on a hardware adapter `auto` measures WebGPU beside the CPU backends and serves
  // on the fastest, instead of taking the GPU because it is there (SwiftShader stands in for
  // the hardware here: the engine is told its adapter is not a fallback one)
  const g = e.gpu_auto;
  t.ok(g.logs.includes('inference: WebGPU adapter found, measuring it against the CPU backends'), 'the adapter is measured, not taken');
  const chose = g.records.find((r: { msg: string }) => r.msg.startsWith('inference: auto chose'));
  t.ok(chose, `the choice is logged: ${g.logs.join(' | ')}`);
  const figures: { provider: string; ms_per_call: number | null }[] = chose?.obj.figures ?? [];
  t.same(figures.map((f) => f.provider), ['native', 'wasm', 'webgpu'], 'every backend measured, the GPU last');
  const webgpu = figures.find((f) => f.provider === 'webgpu');
  t.type(webgpu?.ms_per_call, 'number', `WebGPU measured: ${JSON.stringify(figures)}`);
  const fastest = figures.filter((f) => f.ms_per_call !== null).sort((a, b) => a.ms_per_call! - b.ms_per_call!)[0];
  t.equal(g.provider, fastest?.provider, `the fastest serves: ${chose?.msg}`);
  t.equal(g.readiness.ready, true);
  t.ok(Math.abs(g.score - e.auto.score) <= 1e-4, `served score ${g.score} on ${g.provider}`);

  // the same measurement where the CPU backends' sessions get 2 threads (auto on 16 cores or
  // more): WebGPU loads and is timed on its one session thread, as its pool would serve
  const two: { provider: string; threads: number; ms_per_call: number | null; error?: string }[] = e.two_threads;
  t.same(two.map((f) => [f.provider, f.threads]), [['wasm', 2], ['webgpu', 1]], 'each backend timed on the threads its pool would give it');
  for (const f of two) t.type(f.ms_per_call, 'number', `${f.provider} measured: ${f.error ?? ''}`);
});
