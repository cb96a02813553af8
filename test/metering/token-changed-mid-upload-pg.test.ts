import pg from 'pg';
import t from 'tap';
import { startPostgres } from '../helpers/postgres.ts';
import { startServer } from '../helpers/server.ts';
import { CHANGES, changedMidUpload } from './mid-upload.ts';

// PostgreSQL: the token is read again inside the reservation's PL/pgSQL function; the same on
// LMDB in token-changed-mid-upload.test.ts.
const db = await startPostgres();
t.teardown(() => db.stop());
const server = await startServer({ ready: true, env: { DATABASE_URL: db.url, WORKERS: '1' } });
t.teardown(() => server.stop());
const client = new pg.Client({ connectionString: db.url });
await client.connect();
t.teardown(() => client.end());

const rows = async () => {
  const out: [string, unknown[]][] = [];
  for (const table of ['ledger', 'counters', 'reservations', 'idempotency', 'results']) {
    out.push([table, (await client.query(`SELECT row_to_json(x)::text AS r FROM ${table} x ORDER BY 1`)).rows.map((r) => r.r)]);
  }
  return JSON.stringify(out);
};

for (const [label, change] of CHANGES) {
  t.test(`PostgreSQL: a token ${label} while its request uploads: 401 invalid_token, nothing charged`, (t) => changedMidUpload(t, server, label, change, rows));
}
