// The WebGPU path on a real (if emulated) adapter: Debian's chromium ships SwiftShader, a
// Vulkan driver that runs on the CPU, and Dawn finds it when VK_ICD_FILENAMES names its
// manifest. Slow (shaders compile for about a minute, then ~1.5 s a frame), so one small
// shipped graph is compared, and the engine's adapter choice uses a tiny test graph.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { copySharedUploads } from '../../src/inference/runtime.ts';

const ROOT = join(import.meta.dirname, '../..');
// Shader compilation on an emulated GPU takes minutes on a loaded machine; the file's
// limit is raised for it alone (tap passes this to its runner).
t.setTimeout(20 * 60_000);

/** The SwiftShader Vulkan manifest: the environment's, chromium's usual place, or what
 * dpkg says the chromium package installed. */
function swiftShaderIcd(): string | null {
  const named = process.env.VK_ICD_FILENAMES;
  if (named && existsSync(named)) return named;
  if (existsSync('/usr/lib/chromium/vk_swiftshader_icd.json')) return '/usr/lib/chromium/vk_swiftshader_icd.json';
  try {
    const listed = execFileSync('dpkg', ['-L', 'chromium'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return listed.split('\n').find((l) => l.endsWith('vk_swiftshader_icd.json') && existsSync(l)) ?? null;
  } catch {
    return null;
  }
}

function runChild(script: string, args: string[], icd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // chromium's folder also holds the Vulkan loader (libvulkan.so.1), read at process start
  const libs = [dirname(icd), process.env.LD_LIBRARY_PATH].filter(Boolean).join(':');
  const env = { ...process.env, VK_ICD_FILENAMES: icd, LD_LIBRARY_PATH: libs, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? mkdtempSync(join(tmpdir(), 'xdg-')) };
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, script), ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
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
t.test('WebGPU on SwiftShader gives the WASM outputs; auto skips the fallback adapter', { skip: icd ? false : 'no Vulkan driver found: install Debian\'s chromium (it ships SwiftShader) to run the WebGPU path' }, async (t) => {
  const cmp = await runChild('webgpu-compare.child.ts', ['bgr80_ensemble_v1/bgr80_a.onnx:input:1x3x80x80'], icd!);
  t.equal(cmp.code, 0, cmp.stderr);
  const out = JSON.parse(cmp.stdout);
  t.match(out.adapter, { fallback: true }, `Dawn found ${out.adapter?.name}`);
  const g = out['bgr80_ensemble_v1/bgr80_a.onnx'];
  t.same(Object.keys(g.webgpu), Object.keys(g.wasm), 'the same outputs');
  for (const name of Object.keys(g.wasm)) {
    const a: number[] = g.wasm[name];
    const b: number[] = g.webgpu[name];
    t.equal(b.length, a.length);
    const worst = Math.max(...a.map((v, i) => Math.abs(v - b[i]!)));
    t.ok(worst <= 1e-4, `${name}: largest difference ${worst} (WASM ${a.join(', ')}; WebGPU ${b.join(', ')})`);
  }

  const e = out.engine;
  t.not(e.auto.provider, 'webgpu', 'auto does not serve on a CPU emulation');
  t.ok(e.auto.logs.includes('inference: only a fallback WebGPU adapter (CPU emulation), measuring the CPU backends'));
  t.notOk('execution_note' in e.auto.readiness);
  t.equal(e.webgpu.provider, 'webgpu', 'an explicit webgpu may use it');
  t.match(e.webgpu.readiness, { ready: true, execution_provider: 'webgpu', execution_note: /fallback adapter \(.+\): a CPU emulation/ });
  t.ok(Math.abs(e.webgpu.score - e.auto.score) <= 1e-4, `served score on WebGPU ${e.webgpu.score} vs ${e.auto.provider} ${e.auto.score}`);
});
