import type { SessionLookup } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import type { ActivationRequest, InferenceService } from '../inference/index.ts';
import type { Logger, WorkerMetrics } from '../observability/index.ts';
import type { StoreBackend, TokenRecord } from '../store/index.ts';
import type { ConnectionBalance } from './balance.ts';
import type { HostAdmission } from './capacity.ts';
import type { UploadPacer } from './upload-pace.ts';

/** What the routes of one API worker share. */
export interface Services {
  config: Config;
  store: StoreBackend;
  /** token reads for verify calls, through a cache or straight from the store as the worker
   * chose for its store (absent: straight from the store) */
  tokens?: (hash: string) => Promise<TokenRecord | undefined>;
  /** device sessions with their parent token for verify calls, likewise */
  sessions?: SessionLookup;
  log: Logger;
  metrics: WorkerMetrics;
  inference: InferenceService;
  /** verify slots of the whole host, with the per-address and per-token caps */
  admission: HostAdmission;
  /** keep-alive connections spread over the API workers (absent: never shed) */
  balance?: ConnectionBalance;
  /** minimum upload rate and upload deadline of this worker's verify calls */
  uploadPacer: UploadPacer;
  /** Prometheus text of the whole process (all workers), gathered by the main thread */
  collectMetrics(): Promise<{ text: string; contentType: string }>;
  /** hands a model-set activation to the main thread, which holds the engine; the answer
   * appears in the model-set state (src/inference/model-set-requests.ts) */
  requestModelSet(req: ActivationRequest): void;
}
