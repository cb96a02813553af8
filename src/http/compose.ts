import { configurePasswordChecks, ReadCache, sessionReader, type SessionWithParent } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import { frameSlab } from '../images/index.ts';
import type { ActivationRequest, InferenceService } from '../inference/index.ts';
import { useGeoDatabase } from '../metering/index.ts';
import { WorkerMetrics, type Logger } from '../observability/index.ts';
import type { StoreBackend } from '../store/index.ts';
import { createApp, type AppHandle } from './app.ts';
import { ConnectionBalance } from './balance.ts';
import { HostAdmission } from './capacity.ts';
import { ConnectionCap } from './connections.ts';
import { createCors } from './cors.ts';
import type { Router } from './router.ts';
import { buildRouter } from './routes/index.ts';
import { testFaultHook } from './test-faults.ts';
import { HSTS, appModule, servesTls } from './tls.ts';
import { UploadPacer } from './upload-pace.ts';
import type { UwsModule } from './uws.ts';

// The HTTP side of one API worker, composed in one place: the routes, the services they share
// and the app that dispatches to them. src/worker.ts serves with it in each API worker thread,
// and the in-process test harness (test/helpers/api.ts) serves with the very same function
// inside a test process, so a rule tested there is the rule the service runs: what differs is
// only what is handed in (the engine, the metrics collection, the model-set hand-off), never
// how the app is put together.

/** What a worker hands in: what is one per process (the store handle of this thread, the
 * shared tables, the engine's view) and the two errands that go to the main thread. */
export interface ApiWorkerParts {
  config: Config;
  uws: UwsModule;
  store: StoreBackend;
  log: Logger;
  /** this worker's index among the API workers (its row in the shared tables) */
  index: number;
  /** the host's verify slot table (createAdmissionTable) */
  admissionTable: SharedArrayBuffer;
  /** the per-worker answer counts (createBalanceTable) */
  balanceTable: SharedArrayBuffer;
  /** the country database, read once per process (src/metering/geo.ts) */
  geo: SharedArrayBuffer | null;
  inference: InferenceService;
  /** Prometheus text of the whole process */
  collectMetrics(): Promise<{ text: string; contentType: string }>;
  /** hands a model-set activation to whoever holds the engine */
  requestModelSet(request: ActivationRequest): void;
}

export interface ApiWorker {
  handle: AppHandle;
  router: Router;
  metrics: WorkerMetrics;
}

/** Builds one API worker's app (not listening yet: the caller listens, on its own terms). It
 * sets this thread's module state too (password-check Retry-After, the country database). */
export function composeApiWorker(p: ApiWorkerParts): ApiWorker {
  const { config, store, log } = p;
  useGeoDatabase(p.geo);
  configurePasswordChecks(config);
  const metrics = new WorkerMetrics(`api-${p.index}`, frameSlab, config.VERIFY_SLOTS);
  const admission = new HostAdmission(
    p.admissionTable,
    p.index,
    { slots: config.VERIFY_SLOTS, perAddress: config.UPLOADS_PER_ADDRESS, perToken: config.UPLOADS_PER_TOKEN },
    (n) => metrics.slotsInUse.set(n),
  );
  const uploadPacer = new UploadPacer({
    minBytesPerSecond: config.UPLOAD_MIN_BYTES_PER_SECOND,
    windowSeconds: config.UPLOAD_RATE_WINDOW_SECONDS,
    deadlineSeconds: config.UPLOAD_DEADLINE_SECONDS,
  });

  // PostgreSQL: a token or session read is a round trip; LMDB reads are local and need no cache.
  const cached = store.kind === 'postgres' && config.TOKEN_CACHE_SECONDS > 0;
  const tokenCache = cached ? new ReadCache((hash) => store.getTokenByHash(hash), config.TOKEN_CACHE_SECONDS * 1000) : null;
  const sessionCache = cached ? new ReadCache<SessionWithParent>(sessionReader(store), config.TOKEN_CACHE_SECONDS * 1000) : null;

  const router = buildRouter({
    config,
    store,
    tokens: tokenCache ? (hash) => tokenCache.get(hash) : (hash) => store.getTokenByHash(hash),
    sessions: sessionCache ? (hash) => sessionCache.get(hash) : undefined,
    log,
    metrics,
    inference: p.inference,
    admission,
    balance: new ConnectionBalance(p.balanceTable, p.index),
    uploadPacer,
    collectMetrics: p.collectMetrics,
    requestModelSet: p.requestModelSet,
  });
  const handle = createApp(appModule(p.uws, config), router, log, metrics, {
    cors: createCors(config.CORS_ORIGINS),
    headers: servesTls(config) ? { 'Strict-Transport-Security': HSTS } : null,
    fault: testFaultHook(),
    connections: new ConnectionCap(config),
    retryAfterSeconds: config.RETRY_AFTER_SECONDS,
  });
  return { handle, router, metrics };
}
