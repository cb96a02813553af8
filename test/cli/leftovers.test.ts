import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { LEFTOVER_MS } from '../../src/store/lmdb/backup.ts';
import { runCli, startServer, tempDir } from '../helpers/server.ts';

// A backup killed while LMDB copied the store left `.<name>.partial-<random>` beside the
// target, and a killed restore `DATA_DIR/.restore-<random>`, each as large as the store, for
// ever. The next backup removes the backups' leftovers unwritten for LEFTOVER_MS (a live one
// writes its copy all along); the next restore, and the next server start, remove the
// restores' (they hold DATA_DIR's mark, which a restore holds for its whole run).

const past = (p: string, ms: number) => {
  const at = new Date(Date.now() - ms);
  fs.utimesSync(p, at, at);
};

/** a scratch folder as a backup makes it: the store's copy, maybe the keys' */
function plantBackupScratch(dir: string, name: string, ageMs: number, extra?: string): string {
  const scratch = path.join(dir, name);
  fs.mkdirSync(path.join(scratch, 'keys'), { recursive: true });
  fs.writeFileSync(path.join(scratch, 'data.mdb'), 'part of a copy');
  fs.writeFileSync(path.join(scratch, 'keys', 'current'), 'kid');
  if (extra) fs.writeFileSync(path.join(scratch, extra), 'not a backup\'s');
  for (const p of [path.join(scratch, 'keys', 'current'), path.join(scratch, 'keys'), path.join(scratch, 'data.mdb'), ...(extra ? [path.join(scratch, extra)] : []), scratch]) past(p, ageMs);
  return scratch;
}

t.test('a backup removes what killed backups left beside it, not a live one\'s', async (t) => {
  const dataDir = tempDir();
  t.equal((await runCli(dataDir, ['token', 'create', '--name', 'left', '--grant', 'rgb_liveness:1:never'])).code, 0);
  const dir = tempDir('lv-backups-');
  const old = LEFTOVER_MS + 60_000;
  const killed = plantBackupScratch(dir, '.liveness-2026-11-30.mdb.partial-0badc0de', old);
  const live = plantBackupScratch(dir, '.liveness-2026-12-01.mdb.partial-00c0ffee', old);
  // a live backup's copy is being written: its folder is old, its data.mdb new
  past(path.join(live, 'data.mdb'), 0);
  const notOurs = plantBackupScratch(dir, '.notes.partial-deadbeef', old, 'notes.txt');
  const r = await runCli(dataDir, ['backup', path.join(dir, 'liveness-2026-12-02.mdb')]);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.leftovers_removed, [killed], 'named in the answer');
  t.notOk(fs.existsSync(killed), 'a killed backup\'s copy, unwritten for long, is removed');
  t.ok(fs.existsSync(live), 'one written just now is a live backup\'s: left');
  t.ok(fs.existsSync(notOurs), 'a folder holding what a backup never writes is left');
  t.same(fs.readdirSync(dir).sort(), [path.basename(live), path.basename(notOurs), 'liveness-2026-12-02.mdb'].sort(), 'the backup, and what is left to others');
});

t.test('a restore and a server start remove what killed restores left in DATA_DIR', async (t) => {
  const dataDir = tempDir();
  t.equal((await runCli(dataDir, ['token', 'create', '--name', 'left', '--grant', 'rgb_liveness:1:never'])).code, 0);
  const file = path.join(tempDir('lv-backups-'), 'b.mdb');
  t.equal((await runCli(dataDir, ['backup', file])).code, 0);
  const plant = (name: string) => {
    const scratch = path.join(dataDir, name);
    fs.mkdirSync(path.join(scratch, 'store'), { recursive: true });
    fs.writeFileSync(path.join(scratch, 'store', 'data.mdb'), 'part of a copy');
    return scratch;
  };
  // just made: no age is needed, a restore holds the mark for its whole run
  const first = plant('.restore-0badc0de');
  const r = await runCli(dataDir, ['restore', file]);
  t.equal(r.code, 0, r.stderr);
  t.same(r.json.leftovers_removed, [first], 'named in the answer');
  t.notOk(fs.existsSync(first), 'the next restore removes it');

  const second = plant('.restore-00c0ffee');
  const s = await startServer({ dataDir });
  t.teardown(() => s.stop());
  t.notOk(fs.existsSync(second), 'the next server start removes it');
  t.ok(s.logLines().some((l) => l.msg === 'removed the copy a killed restore left in DATA_DIR' && l.removed === second), 'and says so');
  t.same(fs.readdirSync(dataDir).filter((n) => n.startsWith('.restore-')), []);
});
