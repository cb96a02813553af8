// The engine's backend choice: which execution provider its pool serves on, and the note
// readiness shows when that is unusual. `native` and `wasm` are taken as asked; `webgpu` serves
// on any adapter found and falls back to WASM without one; `auto` measures the candidates at
// start-up on the graphs this engine serves (backend-probe.ts) and the fastest serves. A pool
// thread that cannot use what was chosen reports its fallback here.
import { availableParallelism } from 'node:os';
import type { ModuleId } from '../contract/index.ts';
import { chooseBackend, CPU_CANDIDATES, measureBackends, type BackendChoice } from './backend-probe.ts';
import { noAdapterNote } from './gpu-host.ts';
import type { Manifest } from './manifest.ts';
import { poolShape } from './pool.ts';
import { allowWasmTierUp, webGpuAdapter, type WebGpuAdapter } from './runtime.ts';
import type { ExecutionProvider } from './types.ts';

export type Backend = 'auto' | 'wasm' | 'webgpu' | 'native';

/** The engine's options the choice reads (EngineOptions extends them). */
export interface BackendOptions {
  backend: Backend;
  /** total inference threads (INFERENCE_THREADS); default the CPU cores */
  threads: number;
  /** runs per graph and worker before a module reports ready (default 30) */
  warmupRuns?: number;
  log?: (obj: object, msg: string) => void;
  /** how the engine looks for a WebGPU adapter (default: Dawn's); a test can present an
   * emulated adapter as hardware, to drive `auto`'s GPU measurement where no GPU exists */
  findAdapter?: () => Promise<WebGpuAdapter | null>;
}

export class BackendSelection {
  private chosen: ExecutionProvider | null = null;
  /** shown in readiness: serving on a fallback WebGPU adapter, or on WASM where WebGPU was
   * wanted and no adapter was found */
  private adapterNote: string | null = null;
  /** `auto` on a CPU host: what the start-up measurement found */
  private choice: BackendChoice | null = null;

  /** `loadable`: the modules whose graphs `auto` measures; `signal`: the engine closed (ends
   * `auto`'s measurement early) */
  constructor(
    private readonly opts: BackendOptions,
    private readonly manifest: Manifest,
    private readonly loadable: ModuleId[],
    private readonly signal: AbortSignal,
  ) {}

  /** The provider in use, null until resolve() has decided. */
  get provider(): ExecutionProvider | null {
    return this.chosen;
  }

  /** the provider actually in use; before resolve() the one requested (auto: wasm) */
  get executionProvider(): ExecutionProvider {
    return this.chosen ?? (this.opts.backend === 'native' ? 'native' : this.opts.backend === 'webgpu' ? 'webgpu' : 'wasm');
  }

  private log(obj: object, msg: string): void {
    this.opts.log?.(obj, msg);
  }

  /** Decides the provider (once, at the engine's start). */
  async resolve(): Promise<ExecutionProvider> {
    this.chosen = await this.decide();
    return this.chosen;
  }

  /** A pool thread serves on `provider` instead (its own WebGPU failed); false when that is
   * what was in use already. */
  fellBack(provider: ExecutionProvider, note: string | null): boolean {
    if (provider === this.chosen) return false;
    this.chosen = provider;
    this.adapterNote = note;
    return true;
  }

  /** Only the unusual is noted: a software GPU, WebGPU wanted (or a GPU present) but no
   * adapter, a pool thread's own WebGPU failure, or `auto` that could not use a CPU backend. */
  note(): string | null {
    const notes = [this.adapterNote];
    if (this.chosen !== 'webgpu' && this.choice && this.choice.figures.some((f) => f.ms_per_call === null)) notes.push(this.choice.summary);
    return notes.filter((n) => n !== null).join('; ') || null;
  }

  private async decide(): Promise<ExecutionProvider> {
    const backend = this.opts.backend;
    if (backend === 'native') return 'native';
    if (backend === 'wasm') return 'wasm';
    const adapter = await (this.opts.findAdapter ?? webGpuAdapter)();
    if (backend === 'webgpu') {
      // an explicit `webgpu` serves on any adapter, a fallback one (SwiftShader) included,
      // and readiness says so
      if (adapter) {
        this.log({ adapter: adapter.name, fallback: adapter.fallback }, 'inference: WebGPU adapter found');
        if (adapter.fallback) this.adapterNote = `WebGPU on a fallback adapter (${adapter.name}): a CPU emulation, far slower than WASM`;
        return 'webgpu';
      }
      this.log({ requested: backend }, 'inference: no WebGPU adapter, falling back to WASM');
      this.adapterNote = noAdapterNote('webgpu');
      return 'wasm';
    }
    // `auto`: a GPU serves only where it measured faster than the CPU backends on these graphs
    // (on an H100 WebGPU lost to the CPU on most kinds: docs/gpu.md), so a hardware adapter
    // makes it one more candidate, never the answer by its presence. A fallback adapter is a CPU
    // emulation and is not measured.
    if (adapter && !adapter.fallback) {
      this.log({ adapter: adapter.name }, 'inference: WebGPU adapter found, measuring it against the CPU backends');
      return this.measure([...CPU_CANDIDATES, 'webgpu']);
    }
    if (adapter) this.log({ adapter: adapter.name }, 'inference: only a fallback WebGPU adapter (CPU emulation), measuring the CPU backends');
    // a GPU device node without an adapter: the host lacks what Dawn needs (docs/gpu.md)
    else this.adapterNote = noAdapterNote('auto');
    return this.measure(CPU_CANDIDATES);
  }

  /** `auto`: the fastest of `candidates` that loads these graphs here. */
  private async measure(candidates: ExecutionProvider[]): Promise<ExecutionProvider> {
    if (this.loadable.length === 0) return 'wasm';
    const { sessionThreads } = poolShape(this.opts.threads || availableParallelism(), 'wasm');
    // As long as the pool's own warm-up at most: a test or a CLI that asks for a short warm-up
    // gets a short measurement (the backends differ by several times, not by percents).
    const warmup = this.opts.warmupRuns ?? 30;
    this.log({ candidates }, 'inference: measuring the backends');
    const figures = await measureBackends({
      manifest: this.manifest, modules: this.loadable, threads: sessionThreads, candidates,
      warmupRuns: Math.min(20, Math.max(2, warmup)), rounds: 5, callsPerRound: Math.min(10, Math.max(2, Math.ceil(warmup / 3))),
      signal: this.signal,
    });
    if (this.signal.aborted) return 'wasm'; // unused: the engine's boot() stops here
    this.choice = chooseBackend(figures);
    // the WebGPU candidate put this process's WebAssembly on its baseline tier (runtime.ts
    // keepWasmOnBaselineTier); a CPU backend that won serves with the optimising tier back
    if (candidates.includes('webgpu') && this.choice.provider !== 'webgpu') allowWasmTierUp();
    this.log({ provider: this.choice.provider, figures: figures.map(({ provider, threads, ms_per_call, error }) => ({ provider, threads, ms_per_call, ...(error ? { error } : {}) })) }, `inference: ${this.choice.summary}`);
    return this.choice.provider;
  }
}
