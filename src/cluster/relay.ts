// The main thread's half of the API worker -> inference thread path: a call posted by an API
// worker goes to the engine (and its pool), and the answer goes back to that worker. One
// function, so that bench/relay.mjs measures the path the service runs.
import type { InferenceService, InferenceTiming } from '../inference/index.ts';
import type { FromWorker, ToWorker } from './protocol.ts';

export interface RelayEngine extends InferenceService {
  ping(): Promise<void>;
}

interface Port {
  postMessage(m: ToWorker): void;
}

/** Handles `m` when it is an inference request (infer, ping); false for any other message. */
export function relayInference(engine: RelayEngine, worker: Port, m: FromWorker, onError: (err: Error) => void): boolean {
  if (m.type === 'infer') {
    const timing: InferenceTiming | undefined = m.timed ? {} : undefined;
    engine.infer(m.job, timing).then(
      (results) => worker.postMessage({ type: 'infer-done', id: m.id, results, ...(timing && { timing }) }),
      (err: Error) => {
        onError(err);
        worker.postMessage({ type: 'infer-done', id: m.id, error: err.message, ...(timing && { timing }) });
      },
    );
    return true;
  }
  if (m.type === 'ping') {
    engine.ping().then(
      () => worker.postMessage({ type: 'infer-done', id: m.id, results: [] }),
      (err: Error) => worker.postMessage({ type: 'infer-done', id: m.id, error: err.message }),
    );
    return true;
  }
  return false;
}
