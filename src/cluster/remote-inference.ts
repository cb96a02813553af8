import type { MessagePort } from 'node:worker_threads';
import { isSharedPixels } from '../images/index.ts';
import { InferenceFailedError, type InferenceJob, type InferenceService, type InferenceTiming, type ModuleReadiness, type ResultRecord } from '../inference/index.ts';

export { InferenceFailedError };
import type { FromWorker } from './protocol.ts';
import { ReadinessReader } from './shared-readiness.ts';


/** The API worker's view of the one inference engine that lives in the main thread. Pixel
 * buffers are transferred, not copied: after infer() the caller's arrays are detached, except
 * views of shared memory, which the engine reads in place until the job is answered. */
export class RemoteInference implements InferenceService {
  private pending = new Map<number, { resolve: (r: ResultRecord[]) => void; reject: (e: Error) => void; timer: NodeJS.Timeout; timing?: InferenceTiming }>();
  private nextId = 1;

  /** `timeoutMs`: a job with no answer by then fails as inference_failed, so a hung engine
   * cannot hold a reservation (and its idempotency key) pending until the next restart. A
   * late answer is dropped. */
  constructor(
    private readonly port: MessagePort,
    private readonly timeoutMs = 120_000,
    /** called for each dropped late result: a slow or hung engine an operator should see */
    private readonly onLateResult: () => void = () => {},
    /** the main thread's readiness in shared memory (shared-readiness.ts): what every API
     * worker reads at once (a message reached each worker in its own time) */
    board: SharedArrayBuffer,
  ) {
    this.board = new ReadinessReader(board);
  }

  private readonly board: ReadinessReader;

  /** none until the main thread first publishes (it does before any API worker starts) */
  readiness(): ModuleReadiness[] {
    return this.board.read() ?? [];
  }

  infer(job: InferenceJob, timing?: InferenceTiming): Promise<ResultRecord[]> {
    const transfer: ArrayBuffer[] = [];
    for (const c of job.captures) for (const p of c.pixels) if (p && !isSharedPixels(p)) transfer.push(p.buffer as ArrayBuffer);
    return this.request((id) => (timing ? { type: 'infer', id, job, timed: true } : { type: 'infer', id, job }), transfer, timing);
  }

  /** An empty task to an inference thread and back, on the path infer() takes. */
  async ping(): Promise<void> {
    await this.request((id) => ({ type: 'ping', id }), []);
  }

  private request(message: (id: number) => FromWorker, transfer: ArrayBuffer[], timing?: InferenceTiming): Promise<ResultRecord[]> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // posted first: a job that cannot be sent (e.g. a buffer that cannot be transferred)
      // rejects here instead of leaving a pending entry that nothing will ever settle
      this.port.postMessage(message(id), transfer);
      const timer = setTimeout(() => {
        if (this.pending.delete(id)) reject(new InferenceFailedError(`no inference result within ${this.timeoutMs / 1000} s`));
      }, this.timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve, reject, timer, timing });
    });
  }

  settle(id: number, results: ResultRecord[] | undefined, error: string | undefined, timing?: InferenceTiming): void {
    const p = this.pending.get(id);
    if (!p) {
      // ids are never reused, so an unknown id is a job whose timeout already failed the call
      this.onLateResult();
      return;
    }
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (p.timing && timing) Object.assign(p.timing, timing);
    if (results) p.resolve(results);
    else p.reject(new InferenceFailedError(error ?? 'inference failed'));
  }
}
