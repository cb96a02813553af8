import { parentPort, workerData } from 'node:worker_threads';
import { RemoteInference, type FromWorker, type ToWorker, type WorkerData } from './cluster/index.ts';
import { closeApp, composeApiWorker, listen, loadUws, LISTEN_SHARED, type us_listen_socket } from './http/index.ts';
import { createLogger, stopThreadTracing } from './observability/index.ts';
import { isLmdbCommitRejection, openConfiguredStore } from './store/index.ts';

// One API worker thread: its own uWS app on the shared port (SO_REUSEPORT lets the kernel
// spread connections), its own handle on the store (LMDB, or a PostgreSQL pool and node
// lease), inference through the main thread. The app itself is composed by
// src/http/compose.ts (the in-process test harness serves with the same function); this file
// adds what only a thread has: the messages to and from the main thread, listening on the
// shared port, and the thread's ends (drain, retire).
const { config, port, index, admission: admissionTable, balance: balanceTable, geo, readiness: readinessBoard } = workerData as WorkerData;
const main = parentPort!;
const post = (m: FromWorker) => main.postMessage(m);

const uws = loadUws();
const log = createLogger(config.LOG_LEVEL, { worker: index });
const store = await openConfiguredStore(config, (err) => log.warn({ err: { message: err.message } }, 'store connection error'), log);
// a late result is counted by the worker's metrics, which the composition makes
const inference = new RemoteInference(main, config.INFERENCE_TIMEOUT_SECONDS * 1000, () => metrics.lateInferenceResults.inc(), readinessBoard);

let nextMetricsId = 1;
const metricsWaiters = new Map<number, (r: { text: string; contentType: string }) => void>();

const { handle, metrics } = composeApiWorker({
  config,
  uws,
  store,
  log,
  index,
  admissionTable,
  balanceTable,
  geo,
  inference,
  collectMetrics: () =>
    new Promise((resolve) => {
      const id = nextMetricsId++;
      metricsWaiters.set(id, resolve);
      post({ type: 'metrics-request', id });
    }),
  requestModelSet: (request) => post({ type: 'activate-model-set', request }),
});
let listenSocket: us_listen_socket | null = null;
let appClosed = false;
let retiring = false;

function stopListening(): void {
  if (listenSocket) uws.us_listen_socket_close(listenSocket);
  listenSocket = null;
}

function closeAppOnce(): void {
  if (appClosed) return;
  appClosed = true;
  closeApp(handle.app);
}

// Whatever ends this thread, its uWS app must be closed first: a thread that ends with a live
// app (an exception nobody caught, process.exit) fails Node's check for open handles when its
// event loop closes, and that aborts the whole process, every other worker with it. Closing
// here drops this worker's connections (their calls' abort handlers run) and nothing else.
process.on('exit', () => {
  stopListening();
  closeAppOnce();
});

// A promise nobody awaited that rejects: the request it belonged to has been (or will be)
// answered through its own chain, so the state of this worker is whole. It is logged, as an
// error to fix, and the worker goes on serving (Node's default would end the thread).
process.on('unhandledRejection', (reason) => {
  // lmdb-js's own leftover of a failed write is counted by the store's guard (write-health.ts)
  if (isLmdbCommitRejection(reason)) return;
  log.error({ err: reason }, 'unhandled rejection in an API worker (a promise nobody awaited); serving on');
});

// An exception that escaped every handler may have left this worker's state half-changed, so
// the worker stops taking work and retires: it stops listening (the kernel hands new
// connections to the other workers), lets its in-flight calls finish, closes its app and
// exits; the main thread starts a replacement.
process.on('uncaughtException', (err) => {
  log.error({ err }, 'uncaught exception in an API worker; retiring it');
  retire(() => {
    // The thread ends on its own, like a drained one: process.exit would drop this thread's
    // last log lines (its stdout reaches the main thread asynchronously). The exit code tells
    // the main thread it was not a drain; should something hold the thread open, it exits
    // anyway shortly after.
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 5_000).unref();
    // its figures since the last scrape, which /metrics keeps once it is gone (the main thread
    // reads this message before it sees the thread's exit)
    void metrics.snapshot().then(
      (snapshot) => post({ type: 'metrics-final', snapshot }),
      () => {},
    ).finally(() => main.close());
  });
});

/** Stop accepting, let in-flight calls finish (at most DRAIN_TIMEOUT_MS), close the app and the
 * store, then `end`. */
function retire(end: () => void): void {
  if (retiring) return;
  retiring = true;
  handle.startDrain();
  stopListening();
  let ended = false;
  const finish = () => {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    closeAppOnce();
    // a store that fails to close is the next start's concern; the thread ends either way.
    // Spans still queued are exported first (bounded, never rejects): a stop loses none of them.
    void stopThreadTracing().catch(() => {}).then(() => store.close()).catch(() => {}).finally(end);
  };
  const timer = setTimeout(finish, config.TEST_DRAIN_TIMEOUT_MS); // DRAIN_TIMEOUT_MS unless a test shortened it
  handle.onIdle(finish);
}

void listen(handle.app, config.HOST, port, LISTEN_SHARED).then((socket) => {
  if (!socket) {
    post({ type: 'listen-failed', port });
    return;
  }
  if (retiring) {
    // retired before the listen completed: take no connections at all
    uws.us_listen_socket_close(socket);
    return;
  }
  listenSocket = socket;
  post({ type: 'listening', port });
  // the start-up garbage goes now, not at a major GC that may be far off (src/cluster/tune-gc.ts)
  (globalThis as { gc?: () => void }).gc?.();
});

main.on('message', (msg: ToWorker) => {
  switch (msg.type) {
    case 'infer-done':
      inference.settle(msg.id, msg.results, msg.error, msg.timing);
      break;
    case 'metrics-snapshot':
      void metrics.snapshot().then((snapshot) => post({ type: 'metrics-snapshot', id: msg.id, snapshot }));
      break;
    case 'metrics-text': {
      const w = metricsWaiters.get(msg.id);
      metricsWaiters.delete(msg.id);
      w?.({ text: msg.text, contentType: msg.contentType });
      break;
    }
    case 'drain':
      // Stop accepting, let in-flight calls finish, then close the app so the thread ends
      // on its own (terminate() on a thread with a live uWS app aborts the process).
      retire(() => {
        post({ type: 'drained' });
        main.close();
      });
      break;
  }
});
