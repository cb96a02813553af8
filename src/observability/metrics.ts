import client from 'prom-client';

export type MetricsSnapshot = Awaited<ReturnType<client.Registry['getMetricsAsJSON']>>;

// Each API worker keeps its own registry; the main thread merges the workers' JSON with
// AggregatorRegistry.aggregate so /metrics shows the whole process.
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
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly slotsInUse = new client.Gauge({
    name: 'lv_verify_slots_in_use',
    help: 'verify capacity slots taken (2 per API worker)',
    registers: [this.registry],
  });
  readonly busyRejections = new client.Counter({
    name: 'lv_verify_busy_total',
    help: 'verify calls answered 503 server_busy',
    registers: [this.registry],
  });
  readonly inferenceSeconds = new client.Histogram({
    name: 'lv_inference_duration_seconds',
    help: 'time from hand-off to inference until results, per verify call',
    labelNames: ['module'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  observe(route: string, method: string, status: number, seconds: number): void {
    this.requests.inc({ route, method, status: String(status) });
    this.latency.observe({ route }, seconds);
  }

  snapshot(): Promise<MetricsSnapshot> {
    return this.registry.getMetricsAsJSON();
  }
}

export async function aggregateMetrics(snapshots: MetricsSnapshot[]): Promise<{ text: string; contentType: string }> {
  const merged = client.AggregatorRegistry.aggregate(snapshots as any);
  return { text: await merged.metrics(), contentType: merged.contentType };
}
