// The ready line's first-administrator hint (src/cluster/announce.ts announceListening, the
// function main.ts calls once the API workers listen), on a real LMDB store in this process: a
// hint while no enabled administrator exists, none once one does. The hint's absence with an
// administrator was checked on a started service of its own in start-stop.test.ts (issue 43:
// a server start fewer); its presence still is, on the line `npm start` prints there.
import { Writable } from 'node:stream';
import t from 'tap';
import { announceListening } from '../../src/cluster/announce.ts';
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/observability/index.ts';
import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { tempDir } from '../helpers/server.ts';

/** The 'listening' line announceListening logs for this store and host. */
async function readyLine(store: LmdbBackend, host = '0.0.0.0'): Promise<any> {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  const config = loadConfig({ ...process.env, DATA_DIR: tempDir(), HOST: host, PORT: '0', LOG_LEVEL: 'info' });
  await announceListening(createLogger('info', {}, sink), config, 8123, store);
  return lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'listening');
}

const user = (username: string, role: 'admin' | 'user', enabled: boolean) => ({
  id: `u-${username}`, username, role, enabled, password_hash: 'not used here', created_at: new Date(0).toISOString(),
});

t.test('the hint names the way in while no enabled administrator exists, and goes once one does', async (t) => {
  const store = LmdbBackend.open(tempDir());
  t.teardown(() => store.close());
  let line = await readyLine(store);
  t.match(line, { url: 'http://localhost:8123', console_url: 'http://localhost:8123/admin', first_admin: /user create <name> --role admin/ }, 'no user: the hint');
  t.ok(await store.createUser(user('ops', 'user', true)));
  t.ok(await store.createUser(user('old', 'admin', false)));
  line = await readyLine(store, '127.0.0.1');
  t.equal(line.url, 'http://127.0.0.1:8123');
  t.match(line.first_admin, /--role admin/, 'a user and a disabled administrator: still the hint');
  t.ok(await store.createUser(user('root', 'admin', true)));
  line = await readyLine(store);
  t.ok(line, 'the ready line is logged');
  t.notOk('first_admin' in line, 'an enabled administrator exists: no hint');
});
