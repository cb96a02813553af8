import client from 'prom-client';
import { SERVICE_VERSION } from '../version.ts';
import { collectThreadDefaults } from './thread-metrics.ts';
import { onStoreWriteFailure, storeDownSince, storeRecoveries, storeWritesFailing } from '../store/index.ts';

export type MetricsSnapshot = Awaited<ReturnType<client.Registry['getMetricsAsJSON']>>;

const SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

// Each API worker keeps its own registry; the main thread merges the workers' JSON with its
// own through AggregatorRegistry.aggregate, so /metrics shows the whole process.
//
// prom-client's default metrics are collected in every thread, labelled `thread`: heap,
// event-loop delay, GC and handles are per thread (an isolate each), so they stay apart.
// The `process_*` ones (CPU, RSS, file descriptors, start time) read the whole process and
// would be counted once per thread if summed: only the main thread reports them.
export class WorkerMetrics {
  readonly registry = new client.Registry();
  readonly requests = new client.Counter({
    name: 'lv_http_requests_total',
    help: 'HTTP requests by route pattern, method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly latency = new client.Histogram({
    name: 'lv_http_request_duration_seconds',
    help: 'HTTP request latency by route pattern',
    labelNames: ['route'] as const,
    buckets: SECONDS,
    registers: [this.registry],
  });
  readonly slotsInUse = new client.Gauge({
    name: 'lv_verify_slots_in_use',
    help: 'verify capacity slots taken (2 per API worker)',
    registers: [this.registry],
  });
  readonly busyRejections = new client.Counter({
    name: 'lv_verify_busy_total',
    help: 'verify calls refused by admission control (503 server_busy)',
    registers: [this.registry],
  });
  readonly inferenceSeconds = new client.Histogram({
    name: 'lv_inference_duration_seconds',
    help: 'time from hand-off to inference until results, per verify call (queue wait and compute)',
    labelNames: ['module'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly stepSeconds = new client.Histogram({
    name: 'lv_verify_step_seconds',
    help: 'time verify calls spent in each step (accept, receive: the upload, validate, reserve, infer, settle, respond: audit and signature), whatever its outcome',
    labelNames: ['step'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly verdicts = new client.Counter({
    name: 'lv_verdicts_total',
    help: 'capture results answered, by module, capture mode and verdict (live, non_live, retry); replays are not counted again',
    labelNames: ['module', 'mode', 'verdict'] as const,
    registers: [this.registry],
  });
  readonly units = new client.Counter({
    name: 'lv_units_total',
    help: 'quota units by module: charged (reserved, as the ledger records a charge) and refunded (inference failed, crash recovery, lease sweep, operator refund)',
    labelNames: ['module', 'kind'] as const,
    registers: [this.registry],
  });
  readonly quotaRejections = new client.Counter({
    name: 'lv_quota_rejections_total',
    help: 'verify calls refused with 429 quota_exceeded, by module',
    labelNames: ['module'] as const,
    registers: [this.registry],
  });
  readonly connectionsShed = new client.Counter({
    name: 'lv_connections_shed_total',
    help: 'keep-alive connections closed after a verify answer because their API worker had more than its share of the calls (src/http/balance.ts)',
    registers: [this.registry],
  });
  readonly lateInferenceResults = new client.Counter({
    name: 'lv_inference_late_results_total',
    help: 'inference results that arrived after their call had failed at INFERENCE_TIMEOUT_SECONDS, and were dropped (nothing charged)',
    registers: [this.registry],
  });
  /** Drift in a module's inputs or graphs shows in its score distribution before anyone
   * reads the verdict counts; tenths of the [0, 1] score, finer near the usual thresholds. */
  readonly scores = new client.Histogram({
    name: 'lv_liveness_score',
    help: 'live probability of each capture result answered with a score, by module and mode (replays not counted)',
    labelNames: ['module', 'mode'] as const,
    buckets: [0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9, 1],
    registers: [this.registry],
  });
  readonly verifyErrors = new client.Counter({
    name: 'lv_verify_errors_total',
    help: 'verify calls answered with an error, by module and error code',
    labelNames: ['module', 'code'] as const,
    registers: [this.registry],
  });
  // device sessions (issue 26): by kind of call and status, never by session id, whose
  // number grows without bound (the audit lines carry the id)
  readonly sessionsMinted = new client.Counter({
    name: 'lv_sessions_minted_total',
    help: 'device sessions minted (POST /v1/sessions answered 201), by module',
    labelNames: ['module'] as const,
    registers: [this.registry],
  });
  readonly sessionCalls = new client.Counter({
    name: 'lv_session_calls_total',
    help: 'calls made with a device session token, by call (verify, me) and HTTP status',
    labelNames: ['call', 'status'] as const,
    registers: [this.registry],
  });
  readonly traceSpansDropped = new client.Counter({
    name: 'lv_trace_spans_dropped_total',
    help: 'spans of verify-call traces lost (tracing on): queue_full (the bounded export queue was full), export_failed (the OTLP collector did not take them)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });

  /** `uploadSlab`: the thread's frame slab (src/images/frame-slab.ts), read at each scrape */
  constructor(thread = 'api', uploadSlab: () => { taken: number; residentBytes: number } = () => ({ taken: 0, residentBytes: 0 }), slotsTotal = 0) {
    collectThreadDefaults(this.registry, thread);
    // every API worker reports the host's total; the merge keeps one (max), not the sum
    new client.Gauge({
      name: 'lv_verify_slots',
      help: 'verify capacity slots of the host (2 per API worker); with lv_verify_slots_in_use, how full it is',
      registers: [this.registry],
      aggregator: 'max',
      collect() {
        this.set(slotsTotal);
      },
    });
    new client.Gauge({
      name: 'lv_upload_slab_slots_in_use',
      help: 'upload storage slots (frame slab) holding parts of calls in flight; 0 when no call is',
      registers: [this.registry],
      collect() {
        this.set(uploadSlab().taken);
      },
    });
    // what the slabs hold in RSS: their high-water mark, which rises as deeper slots see their
    // first parts and stops at the slab's size; subtracted from RssAnon it leaves the memory
    // that could grow without bound (the soak's verdict, docs/capacity.md "Upload storage")
    new client.Gauge({
      name: 'lv_upload_slab_resident_bytes',
      help: 'bytes of upload storage (frame slabs) written at least once and so resident until the process ends; at most 20 MiB per API worker',
      registers: [this.registry],
      collect() {
        this.set(uploadSlab().residentBytes);
      },
    });
    // a full disk (src/store/write-health.ts): failed writes by operation, and whether new
    // verify calls are refused now; the store's own threads share the state, so the merged
    // value is the largest (any thread), not the sum
    const failures = new client.Counter({
      name: 'lv_store_write_failures_total',
      help: 'store writes that could not commit (full disk or map, I/O error), by operation: reserve, settle, refund, audit, session ...',
      labelNames: ['op'] as const,
      registers: [this.registry],
    });
    onStoreWriteFailure((op) => failures.inc({ op }));
    new client.Gauge({
      name: 'lv_store_writes_failing',
      help: '1 while the store is failing writes (or, on LMDB, a commit has run STORE_STALL_SECONDS) and verify calls are answered 503 store_unavailable, else 0',
      registers: [this.registry],
      aggregator: 'max',
      collect() {
        this.set(storeWritesFailing() ? 1 : 0);
      },
    });
    storeOutageMetrics(this.registry);
  }

  observe(route: string, method: string, status: number, seconds: number): void {
    this.requests.inc({ route, method, status: String(status) });
    this.latency.observe({ route }, seconds);
  }

  async snapshot(): Promise<MetricsSnapshot> {
    return (await this.registry.getMetricsAsJSON()).filter((m) => !m.name.startsWith('process_'));
  }
}

/** Units the main thread gives back: crash recovery at start and, with PostgreSQL, the sweep
 * of expired nodes' reservations. Same metric as the API workers' lv_units_total, so the
 * aggregated /metrics sums them. Created before the store's start-up hooks run. */
export class RefundMetrics {
  readonly registry = new client.Registry();
  readonly units = new client.Counter({
    name: 'lv_units_total',
    help: 'quota units by module: charged (reserved, as the ledger records a charge) and refunded (inference failed, crash recovery, lease sweep, operator refund)',
    labelNames: ['module', 'kind'] as const,
    registers: [this.registry],
  });

  refunded(module: string, units: number): void {
    this.units.inc({ module, kind: 'refunded' }, units);
  }

  snapshot(): Promise<MetricsSnapshot> {
    return this.registry.getMetricsAsJSON();
  }
}

/** What the main thread can say about inference: readiness per module and the pool's own
 * queue-wait and run-time figures (piscina measures both per task, in milliseconds). */
export interface InferenceStats {
  readiness(): { module_id: string; ready: boolean; model_set: string; trained: boolean }[];
  poolTimes(): { waitTime: TimeSummary; runTime: TimeSummary } | null;
}
interface TimeSummary { p50: number; p90: number; p99: number; max: number }

const QUANTILES = [['0.5', 'p50'], ['0.9', 'p90'], ['0.99', 'p99'], ['1', 'max']] as const;

/** The main thread's registry: the process-wide metrics, its own thread's, and inference. */
export class MainMetrics {
  readonly registry = new client.Registry();

  /** `uws`: the uWebSockets.js build that serves (src/http/uws.ts describeUwsBuild); `store`:
   * the LMDB store's sizes (StoreStatus.sizes; absent on PostgreSQL) */
  constructor(stats: InferenceStats, uws: string | null = null, store: { sizes?(): { usedBytes: number; mapBytes: number } } = {}) {
    collectThreadDefaults(this.registry, 'main');
    if (store.sizes) storeSizeMetrics(this.registry, store.sizes.bind(store));
    new client.Gauge({
      name: 'lv_model_ready',
      help: '1 when the module\'s graphs are loaded and warmed, else 0',
      labelNames: ['module'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const m of stats.readiness()) this.set({ module: m.module_id }, m.ready ? 1 : 0);
      },
    });
    new client.Gauge({
      name: 'lv_build_info',
      help: 'always 1: the service version, the Node.js it runs on and the uWebSockets.js build that serves (docs/platforms.md)',
      labelNames: ['version', 'node', 'uws'] as const,
      registers: [this.registry],
    }).set({ version: SERVICE_VERSION, node: process.versions.node, uws: uws ?? 'none' }, 1);
    new client.Gauge({
      name: 'lv_model_info',
      help: 'always 1: the model set each module serves, and whether its manifest says the weights are trained',
      labelNames: ['module', 'model_set', 'trained'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const m of stats.readiness()) this.set({ module: m.module_id, model_set: m.model_set, trained: String(m.trained) }, 1);
      },
    });
    const pool = (name: string, key: 'waitTime' | 'runTime', help: string) =>
      new client.Gauge({
        name,
        help,
        labelNames: ['quantile'] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          const times = stats.poolTimes();
          if (!times) return;
          for (const [q, field] of QUANTILES) {
            const ms = times[key][field];
            if (Number.isFinite(ms)) this.set({ quantile: q }, ms / 1000);
          }
        },
      });
    pool('lv_inference_queue_wait_seconds', 'waitTime', 'time inference tasks waited for a pool thread, quantiles since start (piscina)');
    pool('lv_inference_compute_seconds', 'runTime', 'time inference tasks ran on a pool thread, quantiles since start (piscina)');
    storeOutageMetrics(this.registry);
  }

  snapshot(): Promise<MetricsSnapshot> {
    return this.registry.getMetricsAsJSON();
  }
}

/** The LMDB store's file and map, read at each scrape by the main thread (one process, one
 * environment: the API workers report none). The map is address space, not memory; a store
 * that outgrows it is mapped again at twice the size while the old mapping stays, and what is
 * read through both is counted twice in RSS (docs/capacity.md, "Memory"): alert before
 * lv_store_used_bytes reaches lv_store_map_bytes. */
function storeSizeMetrics(registry: client.Registry, sizes: () => { usedBytes: number; mapBytes: number }): void {
  new client.Gauge({
    name: 'lv_store_used_bytes',
    help: 'LMDB: bytes of data.mdb up to its last page in use (the file never shrinks; freed pages are reused)',
    registers: [registry],
    collect() {
      this.set(sizes().usedBytes);
    },
  });
  new client.Gauge({
    name: 'lv_store_map_bytes',
    help: 'LMDB: bytes of address space mapped for data.mdb (LMDB_MAP_SIZE_GIB; twice that each time the store outgrew it)',
    registers: [registry],
    collect() {
      this.set(sizes().mapBytes);
    },
  });
}

/** The store's outages (PostgreSQL: no writable host, e.g. while a standby is promoted; see
 * src/store/outages.ts). Every thread has its own pool and meets the same outage, so the merge
 * keeps one value per node (max, or min for "available"), not the sum of the threads'. */
function storeOutageMetrics(registry: client.Registry): void {
  new client.Gauge({
    name: 'lv_store_available',
    help: '0 while the store has no writable host (PostgreSQL restarting or failing over; verify calls answer 503 store_unavailable), else 1',
    registers: [registry],
    aggregator: 'min',
    collect() {
      this.set(storeDownSince() === null ? 1 : 0);
    },
  });
  new client.Gauge({
    name: 'lv_store_recoveries',
    help: 'outages of the store this node recovered from by itself (a database restart, a failover to a promoted standby)',
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.set(storeRecoveries().count);
    },
  });
  new client.Gauge({
    name: 'lv_store_last_recovery_seconds',
    help: 'how long the last store outage lasted: from the first failed call to the first connection to a writable host (0 before any)',
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.set(storeRecoveries().last?.seconds ?? 0);
    },
  });
}

/** The counters and histograms of `snapshots` merged into one snapshot, each by its own
 * aggregator (a sum for all of ours); gauges and summaries are left out. What an API worker
 * counted stays in /metrics after the worker is gone (src/cluster/metrics-gathering.ts): its
 * replacement starts from 0 under the same labels, and without the dead worker's part the sum
 * went back, which Prometheus reads as a counter reset (rate() and increase() then count the
 * whole value again). A gauge says how things are now: a dead worker's has no meaning left. */
export function foldCounters(snapshots: readonly MetricsSnapshot[]): MetricsSnapshot {
  const kept = snapshots.map((s) => s.filter((m) => (m.type as unknown) === 'counter' || (m.type as unknown) === 'histogram'));
  // aggregate() builds the merged metrics at once; each one's get() only hands it back
  const merged = client.AggregatorRegistry.aggregate(kept as any);
  return merged.getMetricsAsArray().map((m) => (m as unknown as { get(): MetricsSnapshot[number] }).get());
}

export async function aggregateMetrics(snapshots: MetricsSnapshot[]): Promise<{ text: string; contentType: string }> {
  const merged = client.AggregatorRegistry.aggregate(snapshots as any);
  return { text: await merged.metrics(), contentType: merged.contentType };
}
