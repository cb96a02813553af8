// LMDB_MAP_SIZE_GIB: the address space the service maps for its LMDB store. At the former fixed
// 2 GiB a busy store outgrew the map within an hour, and lmdb-js then maps the file again at
// twice the size keeping the old mapping, so RssFile counted its pages twice
// (bench/results/soak-30min.md). What is checked here is the mapping the process holds: one,
// of the configured size, on the real store opened as a start opens it.

import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { loadConfig } from '../../src/config/index.ts';
import { request, single, postVerify } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { metric } from '../helpers/metrics.ts';
import { makeToken, startServer } from '../helpers/server.ts';

const GiB = 1024 ** 3;

/** The sizes of the mappings of `<dataDir>/store/data.mdb` in process `pid`. */
function storeMappings(pid: number | 'self', dataDir: string): number[] {
  const file = path.join(fs.realpathSync(dataDir), 'store', 'data.mdb');
  return fs
    .readFileSync(`/proc/${pid}/maps`, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith(` ${file}`))
    .map((line) => {
      const [from, to] = line.split(' ')[0]!.split('-').map((hex) => BigInt(`0x${hex}`));
      return Number(to! - from!);
    });
}

t.test('LMDB_MAP_SIZE_GIB is 1024 by default, a whole number from 1 to 65536', async (t) => {
  t.equal(loadConfig({}, '/srv', 2).LMDB_MAP_SIZE_GIB, 1024);
  t.equal(loadConfig({ LMDB_MAP_SIZE_GIB: '4' }, '/srv', 2).LMDB_MAP_SIZE_GIB, 4);
  for (const bad of ['0', '65537', '1.5', '-1', '2G']) t.throws(() => loadConfig({ LMDB_MAP_SIZE_GIB: bad }, '/srv', 2), /LMDB_MAP_SIZE_GIB/, bad);
});

t.test('the service maps its store once, 1 TiB by default, and serves from it', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const api = await startApi({ engine: 'real', ready: true });
  t.teardown(() => api.stop());
  const tok = await makeToken(api, ['rgb_liveness:10:day']);
  t.equal((await postVerify(api.baseUrl, tok.token, 'rgb_liveness', request([single({ encoding: 'rgb8' })]))).status, 200, 'a charged call commits through the map');
  t.same(storeMappings('self', api.dataDir), [1024 * GiB], 'one mapping of 1 TiB');
  t.equal(await metric(api.baseUrl, 'lv_store_map_bytes'), 1024 * GiB, '/metrics reports the map');
});

// In the service's own process: its main thread opens the store first, and the metering writer
// and the API workers share that environment, so the setting reaches the one mapping.
t.test('a started service maps LMDB_MAP_SIZE_GIB, once', { skip: process.platform !== 'linux' && 'reads /proc' }, async (t) => {
  const server = await startServer({ ready: true, env: { WORKERS: '2', LMDB_MAP_SIZE_GIB: '3' } });
  t.teardown(() => server.stop());
  const tok = await makeToken(server, ['rgb_liveness:10:day']);
  t.equal((await postVerify(server.baseUrl, tok.token, 'rgb_liveness', request([single({ encoding: 'rgb8' })]))).status, 200);
  t.same(storeMappings(server.proc.pid!, server.dataDir), [3 * GiB], 'one mapping of 3 GiB, shared by its threads');
  t.equal(await metric(server.baseUrl, 'lv_store_map_bytes'), 3 * GiB, '/metrics reports the map, once for the process');
  const used = await metric(server.baseUrl, 'lv_store_used_bytes');
  const file = fs.statSync(path.join(server.dataDir, 'store', 'data.mdb')).size;
  t.ok(used > 0 && used % 4096 === 0 && used <= file, `and the store's pages in use: ${used} bytes of a ${file}-byte file`);
  // charged calls grow the store: 20 batches of 32 captures
  const more = await makeToken(server, ['rgb_liveness:1000:day']);
  for (let i = 0; i < 20; i++) t.equal((await postVerify(server.baseUrl, more.token, 'rgb_liveness', request(Array.from({ length: 32 }, () => single({ encoding: 'rgb8' }))))).status, 200);
  t.ok((await metric(server.baseUrl, 'lv_store_used_bytes')) > used, 'which grow as calls are charged');
});
