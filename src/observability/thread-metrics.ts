import client from 'prom-client';

/** prom-client's default metrics of one thread (an isolate: heap, event-loop delay, GC,
 * handles), labelled `thread`, without the `process_*` ones, which read the whole process and
 * are reported once, by the main thread (see metrics.ts). */
export function threadMetrics(thread: string): { snapshot(): Promise<unknown[]> } {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, labels: { thread } });
  return { snapshot: async () => (await registry.getMetricsAsJSON()).filter((m) => !m.name.startsWith('process_')) };
}
