import type { Config } from '../config/index.ts';
import type { InferenceService } from '../inference/types.ts';
import type { Logger } from '../observability/logger.ts';
import type { WorkerMetrics } from '../observability/metrics.ts';
import type { StoreBackend } from '../store/backend.ts';

/** What the routes of one API worker share. */
export interface Services {
  config: Config;
  store: StoreBackend;
  log: Logger;
  metrics: WorkerMetrics;
  inference: InferenceService;
  /** Prometheus text of the whole process (all workers), gathered by the main thread */
  collectMetrics(): Promise<{ text: string; contentType: string }>;
}
