import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, tempDir } from '../helpers/server.ts';
import { hashToken } from '../../src/auth/index.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { Logger } from '../../src/observability/index.ts';
import { startupHooks } from '../../src/startup.ts';
import { openConfiguredStore } from '../../src/store/index.ts';
import { call, usedBy, world } from '../verify/world.ts';
import { missingTool } from '../helpers/required.ts';

// Issue 25: the PostgreSQL store's backup and restore as docs/operations.md gives it, run for real:
// pg_dump of a serving database, pg_restore into another, the copy opened as a node opens it
// serving the same tokens, usage and replays (in process: what the dump must carry is the
// store's content). pg_dump must not be older than the server, so this uses Debian's
// PostgreSQL 15 (server and tools) rather than the embedded 17 of the other store tests.
const BIN = '/usr/lib/postgresql/15/bin';
const canRun = fs.existsSync(`${BIN}/pg_dump`) && fs.existsSync(`${BIN}/initdb`) && process.getuid?.() === 0;
if (!canRun) {
  missingTool(t, `PostgreSQL backup test skipped: needs Debian's postgresql-15 (${BIN}) and root to run it as the postgres user (.ci/run installs it)`);
} else {
  const asPostgres = (cmd: string, args: string[]) => execFileSync('runuser', ['-u', 'postgres', '--', `${BIN}/${cmd}`, ...args], { stdio: 'pipe', encoding: 'utf8' });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-pg15-'));
  fs.chmodSync(dir, 0o755);
  const data = path.join(dir, 'data');
  fs.mkdirSync(data);
  execFileSync('chown', ['postgres', data]);
  const port = 20000 + Math.floor(Math.random() * 20000);
  asPostgres('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']);
  asPostgres('pg_ctl', ['-D', data, '-w', '-o', `-p ${port} -k ${data} -c listen_addresses=127.0.0.1`, '-l', path.join(data, 'log'), 'start']);
  t.teardown(() => {
    try {
      asPostgres('pg_ctl', ['-D', data, '-w', '-m', 'fast', 'stop']);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  const url = (db: string) => `postgres://postgres@127.0.0.1:${port}/${db}`;
  const psql = (sql: string) => execFileSync(`${BIN}/psql`, [url('postgres'), '-v', 'ON_ERROR_STOP=1', '-c', sql], { stdio: 'pipe' });
  psql('CREATE DATABASE lv');
  psql('CREATE DATABASE lv_restored');

  t.test('pg_dump of a serving node, pg_restore into another database: same tokens, usage and replays', async (t) => {
    // the serving node is the service's app and engine in process (test/helpers/api.ts; issue
    // 43: this was a server start): the dump is taken from the database while it serves, and
    // what it must carry is what the node wrote there
    const a = await startApi({ env: { DATABASE_URL: url('lv') }, engine: 'real', ready: true });
    t.teardown(() => a.stop());
    const { token } = await makeToken(a, ['rgb_liveness:10:never']);
    const body = request([single({ id: 'pg-backup-1' })]);
    const first = await postVerify(a.baseUrl, token, 'rgb_liveness', body, { 'idempotency-key': 'pg-key-1' });
    t.equal(first.status, 200, first.text);
    // docs/operations.md's command, run while the node serves
    const dump = path.join(dir, 'liveness.dump');
    execFileSync('sh', ['-c', `umask 077 && ${BIN}/pg_dump --format=custom --file=${dump} "${url('lv')}"`]);
    t.equal(fs.statSync(dump).mode & 0o777, 0o600, 'the dump is private (it holds the signing keys)');
    await a.stop();
    execFileSync(`${BIN}/pg_restore`, ['--clean', '--if-exists', '--no-owner', `--dbname=${url('lv_restored')}`, dump], { stdio: 'pipe' });

    // the restored database served again, in process (issue 43: this was a second node start):
    // the store opened as a node opens it, the start-up hooks every start runs first
    // (src/startup.ts), then the verify use case on it (test/verify/world.ts)
    const config = loadConfig({ DATA_DIR: tempDir(), DATABASE_URL: url('lv_restored'), WORKERS: '1' });
    const store = await openConfiguredStore(config);
    t.teardown(() => store.close());
    await (await startupHooks(store, config, { info: () => {}, warn: () => {}, error: () => {} } as unknown as Logger)).firstPrune;
    const w = world(store);
    w.clock.at = Date.now();
    const record = await store.getTokenByHash(hashToken(token));
    t.ok(record, 'the same token authenticates on the restored database');
    t.equal(await usedBy(w, record!), 1, 'with its usage');
    const again = await call(w, token, body, { idempotencyKey: 'pg-key-1' });
    t.equal(again.status, 200);
    t.equal(again.headers?.['Idempotency-Replayed'], 'true');
    t.equal(again.body, first.text, 'the replay is byte for byte');
    t.equal((await store.verifyLedger()).ok, true, 'the ledger verifies');
  });
}
