// `auto`: which backend serves is decided by measuring them (the CPU backends, and WebGPU where
// a hardware adapter exists), at start-up, on the graphs this engine will serve, with the thread
// count its pool workers will use. A fixed preference would be wrong somewhere: onnxruntime-node
// ran raw_v1 about five times faster than onnxruntime-web's WASM on the hosts measured so far
// (docs/inference-backends.md), but it is an optional dependency with a prebuilt binary per platform,
// and a graph may use an op one runtime lacks. So every candidate that loads is timed, in
// interleaved rounds (a shared host's load drifts; measuring one backend after the other
// would bill the drift to whichever came second), and the fastest median wins.
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import type { ModuleId } from '../contract/index.ts';
import { engineThreadEntry, engineThreadExecArgv } from '../source-ext.ts';
import type { Manifest } from './manifest.ts';
import type { ExecutionProvider } from './types.ts';
import { WEBGPU_SESSION_THREADS } from './runtime.ts';
import type { ProbeReply, ProbeTask } from './protocol.ts';

/** The measurement thread's entry (source-ext.ts engineThreadEntry), read at each measurement. */
export const probeWorkerFile = (): string => fileURLToPath(engineThreadEntry('backend-probe.bundle.mjs', '../workers/backend-probe.ts'));

/** What the measurement found for one backend. */
export interface BackendFigure {
  provider: ExecutionProvider;
  /** intra-op threads per session, as the pool's workers will run it */
  threads: number;
  /** null when the backend or one of the modules did not load; `error` says why */
  ms_per_call: number | null;
  /** ms per call in each round, in round order */
  rounds: number[];
  error?: string;
}

export interface BackendChoice {
  provider: ExecutionProvider;
  figures: BackendFigure[];
  /** one line for the log and the readiness note */
  summary: string;
}

export interface ProbeOptions {
  manifest: Manifest;
  modules: ModuleId[];
  threads: number;
  candidates?: ExecutionProvider[];
  /** calls per candidate before timing: ORT-web's first runs are several times slower */
  warmupRuns?: number;
  rounds?: number;
  callsPerRound?: number;
  /** aborted: no further task starts; the one running finishes (a thread inside the native
   * runtime must not be terminated) and the threads end before the figures, partial, return */
  signal?: AbortSignal;
}

/** CPU backends `auto` chooses among, native first: on a tie the native runtime wins, as it
 * keeps no WASM heap per thread. Where a hardware WebGPU adapter exists, `webgpu` is measured
 * after them (a tie goes to the CPU). */
export const CPU_CANDIDATES: ExecutionProvider[] = ['native', 'wasm'];

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/**
 * Times every candidate on `modules`' graphs. A candidate whose runtime or any module fails
 * to load gets no figure, only its error: serving on it would leave that module unready.
 * Defaults keep it short (about 100 calls per candidate): raw_v1 takes well under a second
 * on native and a few on WASM when the host is busy; the pool's own warm-up follows anyway.
 */
export async function measureBackends(opts: ProbeOptions): Promise<BackendFigure[]> {
  // WebGPU is loaded last whatever the caller's order: its runtime puts V8's WebAssembly on the
  // baseline tier for every module compiled after it in this process (runtime.ts
  // keepWasmOnBaselineTier), so a WASM candidate loaded after it would be timed slower than it
  // serves. The sort is stable: the CPU candidates keep their order, which breaks ties.
  const candidates = [...(opts.candidates ?? CPU_CANDIDATES)].sort((a, b) => Number(a === 'webgpu') - Number(b === 'webgpu'));
  const rounds = opts.rounds ?? 5;
  const calls = opts.callsPerRound ?? 10;
  const threads: { provider: ExecutionProvider; pool: Piscina; figure: BackendFigure }[] = [];
  try {
    for (const provider of candidates) {
      if (opts.signal?.aborted) break;
      const pool = new Piscina({ filename: probeWorkerFile(), execArgv: engineThreadExecArgv(), minThreads: 1, maxThreads: 1, idleTimeout: Number.MAX_SAFE_INTEGER, atomics: 'disabled' });
      // each candidate as its pool would serve: WebGPU on its one session thread
      const sessionThreads = provider === 'webgpu' ? WEBGPU_SESSION_THREADS : opts.threads;
      const figure: BackendFigure = { provider, threads: sessionThreads, ms_per_call: null, rounds: [] };
      threads.push({ provider, pool, figure });
      try {
        const task: ProbeTask = { op: 'load', provider, threads: sessionThreads, manifest: opts.manifest, modules: opts.modules, warmupRuns: opts.warmupRuns ?? 20 };
        const r = (await pool.run(task)) as Extract<ProbeReply, { loaded: ModuleId[] }>;
        const failed = Object.entries(r.errors);
        if (failed.length > 0) figure.error = failed.map(([m, e]) => `${m}: ${e}`).join('; ');
      } catch (e) {
        figure.error = (e as Error).message;
      }
    }
    const live = threads.filter((t) => !t.figure.error);
    for (let round = 0; round < rounds && !opts.signal?.aborted; round++) {
      for (let i = 0; i < live.length && !opts.signal?.aborted; i++) {
        const t = live[(i + round) % live.length]!;
        const r = (await t.pool.run({ op: 'measure', calls } satisfies ProbeTask)) as { ms: number };
        t.figure.rounds.push(r.ms / calls);
      }
    }
    for (const t of live) if (t.figure.rounds.length > 0) t.figure.ms_per_call = median(t.figure.rounds);
  } finally {
    for (const t of threads) {
      await t.pool.run({ op: 'release' } satisfies ProbeTask).catch(() => {});
      await t.pool.destroy();
    }
  }
  return threads.map((t) => t.figure);
}

const fmt = (ms: number) => (ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

/** The fastest candidate with a figure; candidates' order breaks ties. With none, WASM: its
 * runtime ships inside onnxruntime-web, so the pool reports the real error per module. */
export function chooseBackend(figures: BackendFigure[]): BackendChoice {
  let best: BackendFigure | null = null;
  for (const f of figures) if (f.ms_per_call !== null && (best === null || f.ms_per_call < best.ms_per_call!)) best = f;
  const parts = figures.map((f) => (f.ms_per_call !== null ? `${f.provider} ${fmt(f.ms_per_call)} ms` : `${f.provider} did not load (${f.error})`));
  const threads = figures[0]?.threads ?? 1;
  const apart = figures.filter((f) => f.threads !== threads).map((f) => `; ${f.provider} ${f.threads}`).join('');
  if (!best) return { provider: 'wasm', figures, summary: `auto: no backend loaded in the start-up measurement (${parts.join('; ')}); trying WASM` };
  return {
    provider: best.provider,
    figures,
    summary: `auto chose ${best.provider}: ${parts.join(', ')} a call at start-up (${threads} thread${threads === 1 ? '' : 's'} a session${apart})`,
  };
}
