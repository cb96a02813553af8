import type { Config } from '../config/index.ts';
import type { InferenceJob, InferenceService, ModuleReadiness, ResultRecord } from '../inference/types.ts';
import type { Logger } from '../observability/logger.ts';
import { MODULE_IDS } from '../packets/types.ts';

export interface EngineHost extends InferenceService {
  close(): Promise<void>;
}

/** Starts the process's one inference engine (warm-up runs in the background; readiness
 * reports it) and applies the testing-only fault settings around it. */
export async function startEngine(config: Config, log: Logger): Promise<EngineHost> {
  const mod = (await import('../inference/index.ts').catch(() => ({}))) as Partial<typeof import('../inference/index.ts')>;
  if (typeof mod.createInferenceEngine !== 'function') {
    const modules: ModuleReadiness[] = MODULE_IDS.map((module_id) => ({
      module_id, ready: false, model_set: config.MODEL_SET, decision_policy: '', threshold: 0, execution_provider: null, error: 'inference engine not built',
    }));
    return { readiness: () => modules, infer: () => Promise.reject(new Error('inference engine not built')), close: async () => {} };
  }
  const engine = mod.createInferenceEngine({
    modelsDir: config.MODELS_DIR,
    modelSet: config.MODEL_SET,
    backend: config.INFERENCE_BACKEND,
    threads: config.INFERENCE_THREADS,
    warmupRuns: config.WARMUP_RUNS,
    log: (obj, msg) => log.info(obj, msg),
  });
  engine.start().catch((err: Error) => log.error({ err }, 'inference engine failed to start'));
  const delay = config.TEST_INFERENCE_DELAY_MS;
  const failPrefix = config.TEST_INFERENCE_FAIL_PREFIX;
  return {
    readiness: () => engine.readiness(),
    async infer(job: InferenceJob): Promise<ResultRecord[]> {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      if (failPrefix && job.captures.some((c) => c.packet.capture_id.startsWith(failPrefix))) {
        throw new Error('injected inference failure (TEST_INFERENCE_FAIL_PREFIX)');
      }
      return engine.infer(job);
    },
    close: () => engine.close(),
  };
}
