import type { Config } from '../config/index.ts';
import { createModelSetSwitch, watchActivationRequests } from '../inference/index.ts';
import type { PoolTimes } from '../inference/pool.ts';
import type { InferenceJob, InferenceService, ResultRecord } from '../inference/types.ts';
import type { Logger } from '../observability/logger.ts';

export interface EngineHost extends InferenceService {
  close(): Promise<void>;
  poolTimes(): PoolTimes | null;
  poolMetrics(): unknown[][];
}

/** Starts the process's one inference engine (warm-up runs in the background; readiness
 * reports it) and applies the testing-only fault settings around it. */
export function startEngine(config: Config, log: Logger): EngineHost {
  // a switch over model sets: the admin API and the CLI can activate another set live
  const engine = createModelSetSwitch({
    modelsDir: config.MODELS_DIR,
    modelSet: config.MODEL_SET,
    backend: config.INFERENCE_BACKEND,
    threads: config.INFERENCE_THREADS,
    warmupRuns: config.WARMUP_RUNS,
    requireTrained: config.REQUIRE_TRAINED_MODELS,
    log: (obj, msg) => log.info(obj, msg),
  });
  // The shipped sets have random weights: say so where an operator first looks.
  const untrained = engine.readiness().filter((m) => !m.trained);
  if (untrained.length > 0) {
    log.warn(
      { model_set: config.MODEL_SET, modules: untrained.map((m) => m.module_id), require_trained: config.REQUIRE_TRAINED_MODELS },
      config.REQUIRE_TRAINED_MODELS
        ? 'model set is untrained (trained: false): its modules stay unready because REQUIRE_TRAINED_MODELS is set'
        : 'model set is untrained (trained: false): its verdicts mean nothing; deploy trained graphs (README "Deploying a trained model") and set REQUIRE_TRAINED_MODELS=1 in production',
    );
  }
  let closing = false;
  const stopWatching = watchActivationRequests(config.DATA_DIR, config.MODELS_DIR, engine, (obj, msg) => log.info(obj, msg));
  // a stop during warm-up rejects start(); only a failure while serving is an error
  engine.start().catch((err: Error) => {
    if (!closing) log.error({ err }, 'inference engine failed to start');
  });
  const delay = config.TEST_INFERENCE_DELAY_MS;
  const failPrefix = config.TEST_INFERENCE_FAIL_PREFIX;
  return {
    readiness: () => engine.readiness(),
    poolTimes: () => engine.poolTimes(),
    poolMetrics: () => engine.poolMetrics(),
    async infer(job: InferenceJob): Promise<ResultRecord[]> {
      const delayPrefix = config.TEST_INFERENCE_DELAY_PREFIX;
      if (delay > 0 && (!delayPrefix || job.captures.some((c) => c.packet.capture_id.startsWith(delayPrefix)))) await new Promise((r) => setTimeout(r, delay));
      if (failPrefix && job.captures.some((c) => c.packet.capture_id.startsWith(failPrefix))) {
        throw new Error('injected inference failure (TEST_INFERENCE_FAIL_PREFIX)');
      }
      return engine.infer(job);
    },
    close: () => {
      closing = true;
      stopWatching();
      return engine.close();
    },
  };
}
