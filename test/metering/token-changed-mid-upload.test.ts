import t from 'tap';
import { lmdbOpen } from '../helpers/lmdb.ts';
import { startServer } from '../helpers/server.ts';
import { CHANGES, changedMidUpload } from './mid-upload.ts';

// LMDB; the same on PostgreSQL in token-changed-mid-upload-pg.test.ts.
const server = await startServer({ ready: true });
t.teardown(() => server.stop());

const rows = async () => {
  const db = lmdbOpen(server.dataDir);
  try {
    return JSON.stringify((['ledger', 'counters', 'reservations', 'idempotency', 'results'] as const).map((name) => [name, [...db[name].getRange({})].map((e) => [e.key, e.value])]));
  } finally {
    await db.close();
  }
};

for (const [label, change] of CHANGES) {
  t.test(`a token ${label} while its request uploads: 401 invalid_token, nothing charged`, (t) => changedMidUpload(t, server, label, change, rows));
}
