// End-to-end verify over HTTP at saturation: the real server (npm start's code path) with
// WORKERS API workers. The kernel spreads keep-alive connections over the workers by hash,
// not by load, so filling every capacity slot (2 per worker) would measure 503 server_busy
// answers; one request in flight per worker already keeps the 2 cores busy here
// (BENCH_IN_FLIGHT overrides). Figures per scenario: captures/s, p50/p99, status counts.
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';
import { color, postVerify, request, sequence, single } from './harness/captures.ts';
import { makeToken, startServer } from './harness/server.ts';

export interface E2eScenario {
  name: string;
  module: 'rgb_liveness' | 'color_liveness';
  captures: number;
  requests: number;
  captures_per_s: number;
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  non_200: number;
  statuses: Record<string, number>;
}

function quantile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;
}

export async function benchEndToEnd(opts: { quick: boolean }): Promise<{ workers: number; in_flight: number; inference_threads: number; scenarios: E2eScenario[] }> {
  const workers = Number(process.env.WORKERS) || availableParallelism();
  const threads = Number(process.env.INFERENCE_THREADS) || availableParallelism();
  const server = await startServer({ ready: true, env: { WORKERS: String(workers), INFERENCE_THREADS: String(threads), WARMUP_RUNS: '30' }, timeoutMs: 180_000 });
  try {
    const { token } = await makeToken(server, ['rgb_liveness:unlimited:never', 'color_liveness:unlimited:never']);
    const inFlight = Number(process.env.BENCH_IN_FLIGHT) || workers;
    const seconds = opts.quick ? 3 : 10;
    const scenarios = [
      { name: 'rgb_single png', module: 'rgb_liveness' as const, body: request([single()]), captures: 1 },
      { name: 'rgb_single rgb8', module: 'rgb_liveness' as const, body: request([single({ encoding: 'rgb8' })]), captures: 1 },
      { name: 'rgb_sequence 20 png', module: 'rgb_liveness' as const, body: request([sequence(20)]), captures: 1 },
      { name: 'color 4 png', module: 'color_liveness' as const, body: request([color()]), captures: 1 },
      { name: 'batch 32 rgb_single png', module: 'rgb_liveness' as const, body: request(Array.from({ length: 32 }, (_, i) => single({ seed: i + 1 })), { batch: true }), captures: 32 },
    ];
    const out: E2eScenario[] = [];
    for (const s of scenarios) {
      // warm the path (connections, JIT) before measuring
      for (let i = 0; i < inFlight; i++) await postVerify(server.baseUrl, token, s.module, s.body);
      const latencies: number[] = [];
      let non200 = 0;
      const statuses: Record<string, number> = {};
      const t0 = performance.now();
      const until = t0 + seconds * 1000;
      await Promise.all(
        Array.from({ length: inFlight }, async () => {
          while (performance.now() < until) {
            const start = performance.now();
            const r = await postVerify(server.baseUrl, token, s.module, s.body);
            latencies.push(performance.now() - start);
            if (r.status !== 200) non200++;
            const k = r.status === 200 ? '200' : `${r.status} ${r.json?.error?.code ?? ''}`.trim();
            statuses[k] = (statuses[k] ?? 0) + 1;
          }
        }),
      );
      const wall = (performance.now() - t0) / 1000;
      latencies.sort((a, b) => a - b);
      out.push({
        name: s.name,
        module: s.module,
        captures: s.captures,
        requests: latencies.length,
        requests_per_s: latencies.length / wall,
        captures_per_s: (latencies.length * s.captures) / wall,
        p50_ms: quantile(latencies, 0.5),
        p99_ms: quantile(latencies, 0.99),
        non_200: non200,
        statuses,
      });
    }
    return { workers, in_flight: inFlight, inference_threads: threads, scenarios: out };
  } finally {
    await server.stop();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const r = await benchEndToEnd({ quick: process.argv.includes('--quick') });
  console.log(JSON.stringify(r, null, 2));
  process.exit(0);
}
