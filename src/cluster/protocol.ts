// What the main thread and the API workers (src/worker.ts) say to each other: the one
// protocol of that boundary. The main thread starts each API worker with WorkerData, and they
// exchange ToWorker and FromWorker messages; everything here is structured-clone friendly.
import type { MessagePort } from 'node:worker_threads';
import type { Config } from '../config/index.ts';
import type { ActivationRequest, InferenceJob, InferenceTiming, ResultRecord } from '../inference/index.ts';
import type { MetricsSnapshot } from '../observability/index.ts';

export interface WorkerData {
  config: Config;
  port: number;
  index: number;
  /** the host-wide verify slot table (src/http/capacity.ts), shared by every API worker */
  admission: SharedArrayBuffer;
  /** verify calls answered per API worker (src/http/balance.ts), shared by every API worker */
  balance: SharedArrayBuffer;
  /** the country database in shared memory (src/metering/geo.ts), or null where unreadable */
  geo: SharedArrayBuffer | null;
  /** module the thread entry loads (see src/thread-entry.mjs) */
  entry: string;
  /** the engine's module readiness, published by the main thread (src/cluster/shared-readiness.ts) */
  readiness: SharedArrayBuffer;
  /** LMDB: the channel to the process's metering writer, read by the worker's store
   * (src/store/lmdb/writer.ts writerClientFor) */
  lmdbWriter?: { port: MessagePort; storeDir: string };
}

/** main -> API worker */
export type ToWorker =
  | { type: 'drain' }
  | { type: 'metrics-snapshot'; id: number }
  | { type: 'metrics-text'; id: number; text: string; contentType: string }
  /** `timing`: the engine's stages of a job asked with `timed` (a traced call) */
  | { type: 'infer-done'; id: number; results?: ResultRecord[]; error?: string; timing?: InferenceTiming };

/** API worker -> main */
export type FromWorker =
  | { type: 'listening'; port: number }
  | { type: 'listen-failed'; port: number }
  | { type: 'drained' }
  | { type: 'metrics-snapshot'; id: number; snapshot: MetricsSnapshot }
  /** a retiring worker's last figures, sent before it ends (metrics-gathering.ts retired) */
  | { type: 'metrics-final'; snapshot: MetricsSnapshot }
  | { type: 'metrics-request'; id: number }
  | { type: 'infer'; id: number; job: InferenceJob; timed?: true }
  /** the admin API asks for another model set; the answer is in state.json (model-set-requests.ts) */
  | { type: 'activate-model-set'; request: ActivationRequest }
  /** an empty task to an inference thread and back, answered with infer-done and no results
   * (bench/relay.mjs) */
  | { type: 'ping'; id: number };
