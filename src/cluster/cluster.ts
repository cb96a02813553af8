// The API worker threads of this process, seen from the main thread: it starts WORKERS of them
// on the probed port, replaces one that dies (and refunds what it held), relays their
// inference calls to the engine and their metrics requests to every thread, pushes readiness
// to them, and drains them on a stop. It serves no HTTP itself.
import { Worker } from 'node:worker_threads';
import { now } from '../clock.ts';
import { ConfigError, type Config } from '../config/index.ts';
import { createAdmissionTable, createBalanceTable, describeUwsBuild, releaseWorkerSlots } from '../http/index.ts';
import type { ModuleReadiness } from '../inference/index.ts';
import { geoDatabase } from '../metering/index.ts';
import { aggregateMetrics, drainLog, MainMetrics, type Logger, type MetricsSnapshot, type RefundMetrics } from '../observability/index.ts';
import { SOURCE_DIR, SOURCE_EXT, threadEntry } from '../source-ext.ts';
import { storeWriterChannel, type StoreBackend } from '../store/index.ts';
import type { EngineHost } from './engine-host.ts';
import { MetricsGathering } from './metrics-gathering.ts';
import type { FromWorker, ToWorker, WorkerData } from './protocol.ts';
import { relayInference } from './relay.ts';
import { createReadinessBoard, publishReadiness } from './shared-readiness.ts';

/** How long a stop waits for the engine and the store to close, once the calls have drained:
 * with DRAIN_TIMEOUT_MS (30 s), under deploy/liveness.service's TimeoutStopSec (45 s). */
const CLOSE_WAIT_MS = 10_000;

/** More worker losses than this within REPLACEMENT_WINDOW_MS is a crash loop, not a bad
 * request: the process then stops (exit 1) and leaves it to the supervisor. */
const MAX_REPLACEMENTS = 5;
const REPLACEMENT_WINDOW_MS = 60_000;

export class Cluster {
  private workers: Worker[] = [];
  private draining = false;
  private port = 0;
  /** when recent workers were lost, for the crash-loop bound */
  private losses: number[] = [];
  /** workers whose thread has ended (stop() waits for no 'exit' of theirs: it came already) */
  private readonly exited = new WeakSet<Worker>();
  /** /metrics: one broadcast to the API workers shared by the scrapes made meanwhile, with a
   * deadline (metrics-gathering.ts) */
  private readonly gathering: MetricsGathering<Worker, { text: string; contentType: string }>;
  private readonly metrics: MainMetrics;
  // one verify slot table for the host, so that admission does not depend on which worker the
  // kernel handed a connection to
  private admission: SharedArrayBuffer;
  // verify calls answered per worker, so a worker the kernel gave too many connections sheds some
  private balance: SharedArrayBuffer;
  // the country database, read once for every API worker (src/metering/geo.ts)
  private geo: SharedArrayBuffer | null;
  // the engine's module readiness for every API worker to read at once (shared-readiness.ts)
  private readiness: SharedArrayBuffer;

  constructor(private config: Config, private log: Logger, private engine: EngineHost, private store: StoreBackend, private stopRetention: () => Promise<void>, private refunds: RefundMetrics) {
    this.metrics = new MainMetrics(engine, describeUwsBuild(), store);
    this.admission = createAdmissionTable(config.VERIFY_SLOTS);
    this.balance = createBalanceTable(config.WORKERS);
    this.geo = geoDatabase();
    this.readiness = createReadinessBoard();
    this.gathering = new MetricsGathering({
      workers: () => this.workers,
      ask: (w, id) => w.postMessage({ type: 'metrics-snapshot', id } satisfies ToWorker),
      finish: async (snapshots) => aggregateMetrics([...(await Promise.all([this.metrics.snapshot(), this.refunds.snapshot()])), ...snapshots, ...(this.engine.poolMetrics() as MetricsSnapshot[])]),
      late: (late, stale) => this.log.warn(
        { workers: late.map((w) => this.workers.indexOf(w)), stale: stale.map((w) => this.workers.indexOf(w)) },
        'metrics: API workers did not answer in time; their last snapshot was used (none for a worker that never answered)',
      ),
    });
  }

  async start(port: number): Promise<void> {
    this.port = port;
    // published before any worker starts: none serves without it
    publishReadiness(this.readiness, this.engine.readiness());
    const started: Promise<void>[] = [];
    for (let index = 0; index < this.config.WORKERS; index++) started.push(this.spawn(index));
    // readiness is pushed as it changes (warm-up, a failed module, a fallback, a switch)
    this.engine.onReadinessChange((modules) => this.broadcastReadiness(modules));
    this.broadcastReadiness(this.engine.readiness());
    await Promise.all(started);
  }

  /** Starts API worker `index`; resolves once it listens. */
  private spawn(index: number): Promise<void> {
    const port = this.port;
    // Compiled, the API worker runs as one bundled module (scripts/bundle.mjs: about 12 MB
    // less heap per worker than ~150 separate modules).
    const entry = threadEntry('worker.bundle.mjs', 'worker.ts');
    // LMDB: the worker's channel to the process's one metering writer, which commits every
    // worker's reservations and settlements together (src/store/lmdb/writer.ts)
    const lmdbWriter = storeWriterChannel(this.store);
    const data: WorkerData = { config: this.config, port, index, admission: this.admission, balance: this.balance, geo: this.geo, readiness: this.readiness, entry: entry.href, ...(lmdbWriter ? { lmdbWriter } : {}) };
    // Compiled JavaScript starts the thread directly; under tsx the thread must register the
    // loader first (src/thread-entry.mjs, found from src/ as the entries are).
    // An API worker's allocations are small and short-lived (body bytes live outside the JS
    // heap), so a 2 MB young generation costs little GC time (single-png and rgb8 load at
    // c=4 did not move beside 4 MB) and saves committed heap per worker (about 7 MiB against
    // V8's default, 2 MiB against 4 MB), which counts when WORKERS is sized for slow uploads.
    const worker = new Worker(SOURCE_EXT === '.js' ? entry : new URL('thread-entry.mjs', SOURCE_DIR), {
      workerData: data,
      transferList: lmdbWriter ? [lmdbWriter.port] : [],
      resourceLimits: { maxYoungGenerationSizeMb: 2 },
    });
    this.workers[index] = worker;
    let listening = false;
    const started = new Promise<void>((resolve, reject) => {
      const onMsg = (m: FromWorker) => {
        if (m.type === 'listening') {
          listening = true;
          resolve();
        }
        if (m.type === 'listen-failed') reject(new ConfigError(`API worker ${index} could not listen on ${this.config.HOST}:${port}`));
      };
      worker.on('message', onMsg);
      // an exit before listening is handled by replace() (it stops the process)
      worker.once('error', reject);
    });
    worker.on('message', (m: FromWorker) => this.onMessage(worker, m));
    worker.on('error', (err) => this.log.error({ err, worker: index }, 'API worker crashed'));
    // threadId reads -1 once the thread has exited: kept here for the recovery of what it held
    const thread = worker.threadId;
    worker.on('exit', (code) => {
      this.exited.add(worker);
      if (!this.draining) this.replace(index, worker, code, listening, thread);
    });
    return started;
  }

  /** An API worker ended while the process serves: free what it held in the shared tables and
   * start another in its place; the other workers serve on meanwhile. The reservations its
   * calls left pending are refunded and their keys released now, as start-up recovery would
   * for a dead process: records name the thread (LMDB) or the thread's node (PostgreSQL), so
   * the live workers' ones are not touched (recoverThread). */
  private replace(index: number, dead: Worker, code: number, listened: boolean, thread: number): void {
    if (this.workers[index] !== dead) return;
    const freed = releaseWorkerSlots(this.admission, index);
    this.gathering.forget(dead);
    const now = Date.now();
    this.losses = [...this.losses.filter((t) => now - t < REPLACEMENT_WINDOW_MS), now];
    if (!listened || this.losses.length > MAX_REPLACEMENTS) {
      // a worker that cannot even start, or one dying over and over, would only loop here
      const why = listened ? `${this.losses.length} API workers lost within ${REPLACEMENT_WINDOW_MS / 1000} s` : 'it never started listening';
      this.log.fatal({ worker: index, code, freed_slots: freed }, `API worker exited (${why}); shutting down`);
      void this.stop(1);
      return;
    }
    this.log.error({ worker: index, code, freed_slots: freed }, 'API worker exited unexpectedly; starting a replacement');
    // (a process that stops instead leaves them to start-up recovery, with its store closing)
    this.recoverWorker(index, thread);
    this.spawn(index).then(
      () => {
        // (its readiness is the board's, published already: shared-readiness.ts)
        this.log.info({ worker: index }, 'API worker replaced');
      },
      (err: Error) => {
        // its own exit handler has already decided (shutdown when it never listened)
        this.log.error({ worker: index, err: { message: err.message } }, 'replacement API worker failed to start');
      },
    );
  }

  /** Refunds what dead API worker `thread` held; a failure leaves them to start-up recovery
   * (PostgreSQL: to the lease sweep), logged. */
  private recoverWorker(index: number, thread: number): void {
    const at = now();
    this.store.recoverThread(thread, at).then(
      (recovered) => {
        for (const r of recovered) {
          this.refunds.refunded(r.module_id, r.units);
          this.log.warn(
            { reservation: r.id, request_id: r.request_id, token_id: r.token_id, module_id: r.module_id, units: r.units, ...(r.node ? { holder_node: r.node } : { holder_pid: r.pid, holder_thread: r.thread ?? null }) },
            'worker recovery: pending reservation refunded, idempotency key released',
          );
        }
        // holder_thread, as on the lines above: the logger's own `thread` names the main thread
        this.log.warn({ worker: index, holder_thread: thread, recovered: recovered.length }, 'worker recovery finished');
      },
      (err: Error) => this.log.error({ worker: index, holder_thread: thread, err: { message: err.message } }, 'worker recovery failed; start-up recovery refunds what it held'),
    );
  }

  private broadcastReadiness(modules: ModuleReadiness[]): void {
    publishReadiness(this.readiness, modules);
  }

  private onMessage(worker: Worker, m: FromWorker): void {
    if (relayInference(this.engine, worker, m, (err) => this.log.error({ err: { message: err.message } }, 'inference failed'))) return;
    switch (m.type) {
      case 'metrics-request': {
        const reply = (text: string, contentType: string) => worker.postMessage({ type: 'metrics-text', id: m.id, text, contentType } satisfies ToWorker);
        this.gathering.gather().then(
          ({ text, contentType }) => reply(text, contentType),
          (err: unknown) => {
            this.log.error({ err }, 'metrics aggregation failed');
            // answered all the same, so the scrape and the worker's wait for it end
            reply('# metrics aggregation failed: see the service log\n', 'text/plain; version=0.0.4; charset=utf-8');
          },
        );
        break;
      }
      case 'activate-model-set':
        this.engine.requestActivation(m.request);
        break;
      case 'metrics-snapshot':
        this.gathering.answered(worker, m.id, m.snapshot);
        break;
      case 'metrics-final':
        this.gathering.final(worker, m.snapshot);
        break;
      default:
        break;
    }
  }

  /** true once stop() has begun */
  get stopping(): boolean {
    return this.draining;
  }

  /** Drain: each worker closes its listen socket, finishes in-flight calls, closes its app. */
  async stop(code: number): Promise<never> {
    if (this.draining) return new Promise(() => {});
    this.draining = true;
    this.log.info({ workers: this.workers.length }, 'draining');
    // A worker that has exited already (the one whose death stops a crash loop) sends no 'exit'
    // again: waiting for it left the process with nothing to wait on but an unref'd timer, so
    // node ended by itself with code 0 (no restart under Restart=on-failure), before the engine
    // and the store were closed.
    const exits = this.workers.map((w) => (this.exited.has(w) ? Promise.resolve() : new Promise<void>((r) => { w.once('exit', () => r()); })));
    for (const w of this.workers) if (!this.exited.has(w)) w.postMessage({ type: 'drain' } satisfies ToWorker);
    // ref'd, these bounds: the process lives until process.exit below, whatever else it holds
    // DRAIN_TIMEOUT_MS (30 s) unless a test shortened it
    const timeout = new Promise<void>((r) => setTimeout(r, this.config.TEST_DRAIN_TIMEOUT_MS));
    await Promise.race([Promise.all([...exits, this.stopRetention()]), timeout]);
    // The engine and the store close within CLOSE_WAIT_MS together: a store whose metering
    // writer is stuck inside a commit (a disk that does not answer) never closed, and the stop
    // never ended. What that commit held was never answered; start-up recovery refunds it.
    const closed = await new Promise<boolean>((resolve) => {
      const bound = setTimeout(() => resolve(false), CLOSE_WAIT_MS);
      void (async () => {
        await this.engine.close().catch(() => {});
        await this.store.close().catch(() => {});
      })().then(() => {
        clearTimeout(bound);
        resolve(true);
      });
    });
    if (!closed) {
      this.log.error({ waited_ms: CLOSE_WAIT_MS }, 'the engine or the store did not close in time (a stuck disk?); killing the process: the next start recovers what was pending');
      this.log.info({ code: 'SIGKILL' }, 'stopped');
      // the lines above are still in the logger's buffer, or being written: SIGKILL would drop them
      await drainLog(this.log, 1000);
      // process.exit would wait too: its teardown joins the threads and closes the LMDB
      // environment, and the thread stuck inside the commit holds both (seen: still alive
      // 90 s after its SIGTERM). Nothing answered is lost: what the stuck commit held was
      // never answered, and start-up recovery refunds it.
      process.kill(process.pid, 'SIGKILL');
    }
    this.log.info({ code }, 'stopped');
    process.exit(code);
  }
}
