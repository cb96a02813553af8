// Experiment (not part of any suite): what RssFile shows when an LMDB store outgrows its map.
// lmdb-js maps the file again at twice the size and keeps the old mapping (for readers still
// on it), so pages read through each mapping are counted again. Fills one database with 3 KB
// values and, every 128 MiB of store, reads all of them and prints RssFile and the mappings of
// data.mdb. bench/results/soak-30min.md says what it showed.
//
//   node bench/experiments/lmdb-remap.mjs <map bytes> <store MiB>
//   e.g. node bench/experiments/lmdb-remap.mjs 67108864 600     (a 64 MiB map: remaps)
//        node bench/experiments/lmdb-remap.mjs 1099511627776 600 (1 TiB, the default: none)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { open } from 'lmdb';

const mapSize = Number(process.argv[2]);
const target = Number(process.argv[3] ?? 600) * 2 ** 20;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lmdb-remap-'));
const file = path.join(dir, 'data.mdb');
const root = open({ path: dir, maxDbs: 32, mapSize, compression: false });
const db = root.openDB({ name: 'filler' });
const rssFileMiB = () => Number(/RssFile:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
const mappingsMiB = () =>
  fs.readFileSync('/proc/self/maps', 'utf8').split('\n').filter((l) => l.endsWith(` ${file}`)).map((l) => {
    const [from, to] = l.split(' ')[0].split('-').map((h) => parseInt(h, 16));
    return Math.round((to - from) / 2 ** 20);
  });
const value = 'x'.repeat(3000);
let key = 0;
for (let next = 0; ;) {
  root.transactionSync(() => {
    for (let i = 0; i < 100; i++) void db.put(key++, value);
  });
  const size = fs.statSync(file).size;
  if (size >= next) {
    let bytes = 0;
    for (const { value: v } of db.getRange()) bytes += v.length;
    console.log(`store ${(size / 2 ** 20).toFixed(0)} MiB (read ${(bytes / 2 ** 20).toFixed(0)} MiB), RssFile ${rssFileMiB().toFixed(0)} MiB, mappings [${mappingsMiB().join(', ')}] MiB`);
    next += 128 * 2 ** 20;
  }
  if (size >= target) break;
}
await root.close();
fs.rmSync(dir, { recursive: true, force: true });
