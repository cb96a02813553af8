// What the main thread and the pool workers say to each other. Everything here is
// structured-clone friendly; pixel buffers travel in transfer lists.
import type { ModuleId } from '../packets/types.ts';
import type { Manifest } from './manifest.ts';
import type { ColorOutputs, FrameOutputs } from './runner.ts';
import type { ExecutionProvider } from './types.ts';

export interface WorkerConfig {
  manifest: Manifest;
  modules: ModuleId[];
  provider: ExecutionProvider;
  sessionThreads: number;
  warmupRuns: number;
  /** BroadcastChannel name on which workers report warm-up progress */
  channel: string;
}

export type WorkerTask =
  | { op: 'frames'; module: ModuleId; pixels: Uint8Array[] }
  | { op: 'temporal'; module: ModuleId; features: Float32Array; frames: number }
  | { op: 'color'; module: ModuleId; pixels: Uint8Array[] };

export type WorkerReply<T extends WorkerTask> = T extends { op: 'frames' }
  ? FrameOutputs
  : T extends { op: 'temporal' }
    ? { probability: number; logit: number }
    : ColorOutputs;

export type WorkerReport =
  | { kind: 'provider'; worker: number; provider: ExecutionProvider; note: string | null }
  | { kind: 'warm'; worker: number; module: ModuleId; ms: number }
  | { kind: 'error'; worker: number; module: ModuleId | null; message: string };
