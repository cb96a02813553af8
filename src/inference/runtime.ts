// One place that knows how to get an ONNX Runtime for a backend. Workers, the model
// check and the benchmark all create sessions through this.
import { existsSync, readdirSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import type { InferenceSession, Tensor } from 'onnxruntime-web';
import type { ExecutionProvider } from './types.ts';
import type { InputArray } from './preprocess.ts';
import { webGpuProvider } from './webgpu-layout.ts';

export interface Feed {
  data: InputArray;
  dims: number[];
}

export interface OutputTensor {
  data: Float32Array;
  dims: readonly number[];
}

export interface InputShape {
  type: string;
  /** numbers are fixed dimensions, strings symbolic ones */
  shape: readonly (number | string)[];
}

export interface Session {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  /** declared type and shape of an input, when the runtime reports it */
  input(name: string): InputShape | null;
  run(feeds: Record<string, Feed>, outputs: string[]): Promise<Record<string, OutputTensor>>;
  release(): Promise<void>;
}

export interface Runtime {
  readonly provider: ExecutionProvider;
  createSession(model: Uint8Array): Promise<Session>;
  /** Frees what outlives the sessions (the WebGPU device); the runtime is unusable after. */
  close?(): Promise<void>;
}

type TensorCtor = new (type: 'float32' | 'uint8', data: InputArray, dims: readonly number[]) => Tensor;
interface OrtLike {
  Tensor: TensorCtor;
  InferenceSession: { create(model: Uint8Array, options?: InferenceSession.SessionOptions): Promise<InferenceSession> };
}

function wrap(ort: OrtLike, session: InferenceSession): Session {
  return {
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    input(name) {
      const meta = (session as { inputMetadata?: readonly { name: string; isTensor: boolean; type?: string; shape?: readonly (number | string)[] }[] }).inputMetadata;
      const m = meta?.find((x) => x.name === name);
      return m && m.isTensor && m.type && m.shape ? { type: m.type, shape: m.shape } : null;
    },
    async run(feeds, outputs) {
      const tensors: Record<string, Tensor> = {};
      for (const [name, feed] of Object.entries(feeds)) {
        tensors[name] = new ort.Tensor(feed.data instanceof Uint8Array ? 'uint8' : 'float32', feed.data, feed.dims);
      }
      const result = await session.run(tensors, outputs);
      const out: Record<string, OutputTensor> = {};
      for (const name of outputs) {
        const t = result[name];
        if (!t || t.type !== 'float32') throw new Error(`graph output "${name}" is missing or not float32`);
        out[name] = { data: t.data as Float32Array, dims: t.dims };
        // WebGPU tensors may live on the GPU; CPU ones are plain views, nothing to free.
      }
      return out;
    },
    release: () => session.release(),
  };
}

/**
 * On Linux Dawn reaches GPUs through Vulkan only, and without the Vulkan loader it writes a
 * multi-line warning straight to fd 2 from native code, where no logger can catch it. Asking
 * the system's dynamic loader first (the same search Dawn's dlopen does) lets a machine
 * without Vulkan skip the probe quietly; the caller logs the fallback to WASM as a JSON line.
 * process.dlopen on a library that is not a Node addon throws either way: "cannot open
 * shared object file" means absent, anything else (no self-registration) means present.
 */
function vulkanLoaderPresent(): boolean {
  if (process.platform !== 'linux') return true;
  try {
    process.dlopen({ exports: {} } as NodeJS.Module, 'libvulkan.so.1');
    return true;
  } catch (e) {
    return !/cannot open shared object file/.test((e as Error).message);
  }
}

/**
 * A GPU is reached through a device node: /dev/dri/renderD* (Mesa's AMD and Intel drivers),
 * /dev/nvidiactl (NVIDIA's), /dev/dxg (WSL). Without one, the Vulkan drivers a desktop
 * package pulls in (Mesa's, with lavapipe: Debian's chromium and ffmpeg bring them) can offer
 * only a CPU adapter, which `auto` never serves on, and they print "XDG_RUNTIME_DIR is invalid"
 * and Dawn's adapter warnings to fd 2 on every start. So the probe is skipped there, unless the
 * operator names a driver (VK_ICD_FILENAMES / VK_DRIVER_FILES: SwiftShader in the tests).
 */
function gpuDeviceOrNamedDriver(): boolean {
  if (process.platform !== 'linux') return true;
  if (process.env.VK_ICD_FILENAMES || process.env.VK_DRIVER_FILES) return true;
  if (existsSync('/dev/nvidiactl') || existsSync('/dev/dxg')) return true;
  try {
    return readdirSync('/dev/dri').some((n) => n.startsWith('renderD'));
  } catch {
    return false;
  }
}

export interface WebGpuAdapter {
  /** the adapter's description, e.g. "SwiftShader driver 5.0.0" */
  name: string;
  /** Dawn's isFallbackAdapter: a CPU emulation (SwiftShader), correct but about 1.5 s a
   * frame here, far slower than WASM; `auto` never serves on one */
  fallback: boolean;
}

type DawnAdapter = { info?: { description?: string; vendor?: string; isFallbackAdapter?: boolean } } | null;
type DawnModule = {
  create(flags: string[]): { requestAdapter(): Promise<DawnAdapter> };
  globals: Record<string, unknown>;
};

/**
 * onnxruntime-web's threaded build hands GPUQueue.writeBuffer views of its shared
 * WebAssembly memory; Dawn's binding rejects a SharedArrayBuffer-backed source
 * ("Invalid argument"), so every inference failed on its first upload. Such sources are
 * copied into a plain buffer first. `slice` of a typed array allocates a new, unshared
 * ArrayBuffer of the same element type, so dataOffset and size (in elements) keep their
 * meaning. Installed once per realm, on the prototype every queue shares.
 */
export function copySharedUploads(globals: Record<string, unknown>): void {
  const Queue = globals.GPUQueue as { prototype: Record<string, unknown> } | undefined;
  if (!Queue || (Queue.prototype as { __lvSharedCopy?: boolean }).__lvSharedCopy) return;
  const write = Queue.prototype.writeBuffer as (this: unknown, ...args: unknown[]) => unknown;
  Queue.prototype.writeBuffer = function writeBuffer(this: unknown, buffer: unknown, offset: unknown, data: unknown, ...rest: unknown[]) {
    let src = data;
    if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
      src = data instanceof DataView
        ? new DataView(new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice().buffer)
        : (data as unknown as Uint8Array).slice();
    } else if (data instanceof SharedArrayBuffer) {
      src = new Uint8Array(data).slice().buffer;
    }
    return write.call(this, buffer, offset, src, ...rest);
  };
  (Queue.prototype as { __lvSharedCopy?: boolean }).__lvSharedCopy = true;
}

/** Asks Dawn (the `webgpu` package) for an adapter; null when none exists. With
 * `install`, also exposes it as navigator.gpu, which onnxruntime-web/webgpu expects. */
export async function webGpuAdapter(install = false): Promise<WebGpuAdapter | null> {
  if (!vulkanLoaderPresent() || !gpuDeviceOrNamedDriver()) return null;
  try {
    const mod = (await import('webgpu')) as unknown as DawnModule;
    const gpu = mod.create([]);
    const adapter = await gpu.requestAdapter();
    if (!adapter) return null;
    const found = { name: adapter.info?.description || adapter.info?.vendor || 'webgpu', fallback: adapter.info?.isFallbackAdapter === true };
    if (!install) return found;
    Object.assign(globalThis, mod.globals);
    copySharedUploads(mod.globals);
    Object.defineProperty(globalThis, 'navigator', { value: { gpu }, configurable: true, writable: true });
    return found;
  } catch {
    return null;
  }
}

/** onnxruntime-web keeps the device it requested in env.webgpu.device and never destroys
 * it; destroyed here, its buffers and pipelines go before the thread does. */
function destroyWebGpuDevice(ort: unknown): void {
  const env = (ort as { env?: { webgpu?: { device?: { destroy?(): void } } } }).env;
  env?.webgpu?.device?.destroy?.();
}

/**
 * onnxruntime-web's WebGPU build is its asyncify build, whose functions are several times
 * larger than the plain WASM build's. V8 compiles it with Liftoff first and then, for the
 * functions that ran enough, with TurboFan on background threads; on those functions
 * TurboFan took minutes of CPU here, so a warm, idle engine kept about a core busy, and a
 * process exiting waited for the running compile job to finish (seen in gdb: the main
 * thread in NodePlatform::DrainTasks, a platform thread in TurboFan's register allocator
 * for a wasm function, five minutes after SIGTERM). With tier-up off the module stays on
 * Liftoff code: on the WebGPU path the heavy work is on the GPU. Flags are process-wide
 * and read when a module is compiled (this thread's is compiled after this call), so any
 * module compiled later in this process stays on Liftoff too; a process serving WASM or
 * native never calls it. Measured on an H100 (bench/results/gpu-h100.md): tier-up would
 * give 30-40 % more single frames and batches a second, for a whole core while idle and an
 * exit 8.5 s after SIGTERM (0.21 s on Liftoff).
 */
function keepWasmOnBaselineTier(): void {
  setFlagsFromString('--no-wasm-dynamic-tiering');
  setFlagsFromString('--no-wasm-tier-up');
}

/** Undoes keepWasmOnBaselineTier for modules compiled from now on: `auto`'s start-up
 * measurement tried WebGPU in a thread of this process and a CPU backend won, so the pool's
 * WASM (which V8's defaults tier up) is not left on baseline code. */
export function allowWasmTierUp(): void {
  setFlagsFromString('--wasm-dynamic-tiering');
  setFlagsFromString('--wasm-tier-up');
}

/** The adapter's name, or null: kept for callers that only ask whether one exists. */
export async function webGpuAdapterName(install = false): Promise<string | null> {
  return (await webGpuAdapter(install))?.name ?? null;
}

/**
 * WebGPU's session threads, whatever a caller asks. In Node, onnxruntime-web 1.30's WebGPU
 * build cannot start WASM threads: asked for 2, every session failed to load with "[webgpu]
 * TypeError: fetch failed" (here on SwiftShader; on an H100 it kept `auto` from measuring
 * the GPU on a 16-core host, where the CPU backends' sessions get 2 threads). The graphs run
 * on the GPU; the WASM side only feeds it.
 */
export const WEBGPU_SESSION_THREADS = 1;

/**
 * `threads` is this runtime's intra-op thread count (per session). ORT-web's own
 * default (min(4, cores/2) per session) multiplies under a pool, so it is always set.
 * WebGPU ignores it (WEBGPU_SESSION_THREADS), and throws when no adapter exists; callers
 * fall back to WASM.
 */
export async function createRuntime(provider: ExecutionProvider, threads: number): Promise<Runtime> {
  if (provider === 'native') {
    const ort = (await import('onnxruntime-node')) as unknown as OrtLike;
    const options: InferenceSession.SessionOptions = {
      executionProviders: ['cpu'],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    };
    return { provider, createSession: async (m) => wrap(ort, await ort.InferenceSession.create(m, options)) };
  }
  if (provider === 'webgpu') {
    if (!(await webGpuAdapterName(true))) throw new Error('no WebGPU adapter');
    keepWasmOnBaselineTier();
    const ort = (await import('onnxruntime-web/webgpu')) as unknown as OrtLike & { env: { wasm: { numThreads: number } } };
    ort.env.wasm.numThreads = WEBGPU_SESSION_THREADS;
    // per graph: a Conv the provider misreads in NHWC keeps NCHW (webgpu-layout.ts)
    const options = (m: Uint8Array): InferenceSession.SessionOptions => ({ executionProviders: [webGpuProvider(m), 'wasm'], graphOptimizationLevel: 'all' });
    return { provider, createSession: async (m) => wrap(ort, await ort.InferenceSession.create(m, options(m))), close: async () => destroyWebGpuDevice(ort) };
  }
  const ort = (await import('onnxruntime-web')) as unknown as OrtLike & { env: { wasm: { numThreads: number } } };
  ort.env.wasm.numThreads = threads;
  const options: InferenceSession.SessionOptions = { executionProviders: ['wasm'], graphOptimizationLevel: 'all' };
  return { provider, createSession: async (m) => wrap(ort, await ort.InferenceSession.create(m, options)) };
}
