import client from 'prom-client';

/** prom-client's default metrics of a thread, sampling its event-loop delay every 100 ms.
 * prom-client's own period, 10 ms, is a libuv timer that wakes every thread that reports
 * (the main thread, each API worker, each inference thread) 100 times a second, idle or not:
 * about 80 wake-ups a second per thread measured, 1,500 a second and 4 % of a core for an idle
 * service at the default 16 API workers on 2 cores, and several wake-ups per capture under load
 * (bench/results/jit-s50.md). At 100 ms a stall of 100 ms or more still always delays a sample,
 * so `nodejs_eventloop_lag_*` still sees every stall the documented alert is about; shorter
 * stalls are sampled less often. Node's histogram records the whole interval between samples,
 * the period included: an idle thread's figures read ~0.1 s (were ~0.01 s), so the alert's
 * threshold went 0.2 -> 0.3 s to keep meaning a ~0.2 s stall (docs/observability.md). */
export function collectThreadDefaults(registry: client.Registry, thread: string): void {
  client.collectDefaultMetrics({ register: registry, labels: { thread }, eventLoopMonitoringPrecision: 100 });
}

/** prom-client's default metrics of one thread (an isolate: heap, event-loop delay, GC,
 * handles), labelled `thread`, without the `process_*` ones, which read the whole process and
 * are reported once, by the main thread (see metrics.ts). */
export function threadMetrics(thread: string): { snapshot(): Promise<unknown[]> } {
  const registry = new client.Registry();
  collectThreadDefaults(registry, thread);
  return { snapshot: async () => (await registry.getMetricsAsJSON()).filter((m) => !m.name.startsWith('process_')) };
}
