import type { Worker } from 'node:worker_threads';
import t from 'tap';
import { createInferenceEngine } from '../../src/inference/index.ts';
import { ROOT } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { join } from 'node:path';

// The inference pool threads push their default metrics (heap, event loop, GC) to the engine,
// which hands the latest of each to /metrics, labelled thread="inference-<id>". A thread that
// ends (a native crash, a task that killed it) is replaced by piscina under a new id; its last
// figures were still reported, frozen, for ever. In process, on the engine itself: the pool's
// threads cannot be reached through the server. WASM, which a thread ends safely under.

t.setTimeout(180_000);

t.test('a pool thread that ends: its figures leave /metrics, its replacement\'s come', async (t) => {
  const engine = createInferenceEngine({
    modelsDir: join(ROOT, 'models'), modelSet: 'raw_v1', backend: 'wasm', threads: 2, warmupRuns: 1, enabledModules: ['rgb_liveness'],
  });
  t.teardown(() => engine.close());
  await engine.start();
  const threads = () => new Set((engine.poolMetrics() as { name: string; values: { labels: { thread: string } }[] }[][])
    .flatMap((snap) => snap.filter((m) => m.name === 'nodejs_heap_size_used_bytes').flatMap((m) => m.values.map((v) => v.labels.thread))));
  // the pool's threads, piscina's own list (the engine does not expose them)
  const pool = (): Worker[] => (engine as unknown as { pool: { piscina: { threads: Worker[] } } }).pool.piscina.threads;
  const first = pool().map((w) => w.threadId);
  await waitFor(() => first.every((id) => threads().has(`inference-${id}`)), { what: 'both threads\' first figures' });

  const victim = pool()[0]!;
  const dead = `inference-${victim.threadId}`;
  await victim.terminate();
  const fresh = await waitFor(() => pool().map((w) => w.threadId).find((id) => id >= 0 && !first.includes(id)), { what: 'piscina\'s replacement thread', timeoutMs: 60_000 });
  await waitFor(() => threads().has(`inference-${fresh}`), { what: 'the replacement\'s figures', timeoutMs: 60_000 });
  const now = threads();
  t.notOk(now.has(dead), `the ended thread (${dead}) is not reported`);
  t.same([...now].sort(), [`inference-${first[1]}`, `inference-${fresh}`].sort(), 'the live threads are');
});
