import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ABANDONED_CLAIM_MS } from '../../src/retention/archive.ts';
import { runCli, tempDir } from '../helpers/server.ts';

// A pruner claims an expired demo-archive day by renaming it `.pruning-<day>-<pid>-<random>`,
// then removes it. One killed in between (kill -9 while it removed thousands of face images)
// left the claim for ever: no pass looked at it again. Each pass now removes the claims of
// expired days that have not changed for ABANDONED_CLAIM_MS, and leaves a live pruner's claim
// (changed just now) and a claim of a day still kept.

t.test('a pass removes claims a killed pruner left, not a live one nor a kept day', async (t) => {
  const dataDir = tempDir();
  t.equal((await runCli(dataDir, ['token', 'create', '--name', 'arch', '--grant', 'rgb_liveness:1:never'])).code, 0, 'a store to prune');
  const archive = path.join(dataDir, 'archive');
  const today = new Date().toISOString().slice(0, 10);
  const plant = (name: string, requests: number, ageMs: number) => {
    const dir = path.join(archive, name);
    for (let i = 0; i < requests; i++) {
      fs.mkdirSync(path.join(dir, `req_${i}`), { recursive: true });
      for (const f of ['part-000.bin', 'metadata.json', 'parts.json']) fs.writeFileSync(path.join(dir, `req_${i}`, f), 'face');
    }
    const at = new Date(Date.now() - ageMs);
    fs.utimesSync(dir, at, at);
    return dir;
  };
  const dead = plant('.pruning-2020-01-01-4242-0badc0de', 3, ABANDONED_CLAIM_MS + 60_000);
  const live = plant('.pruning-2020-01-02-4243-00c0ffee', 2, 0);
  const kept = plant(`.pruning-${today}-4244-0defaced`, 1, ABANDONED_CLAIM_MS + 60_000);
  const other = plant('.pruning-notaday', 1, ABANDONED_CLAIM_MS + 60_000);
  const expiredDay = plant('2020-01-03', 2, ABANDONED_CLAIM_MS + 60_000);

  const r = await runCli(dataDir, ['retention', 'prune']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.json.archive, 5, 'the expired day and the dead pruner\'s claim: their request folders counted');
  t.notOk(fs.existsSync(dead), 'the claim a killed pruner left (an expired day, unchanged for long) is gone');
  t.notOk(fs.existsSync(expiredDay), 'the expired day too');
  t.ok(fs.existsSync(live), 'a claim changed just now is a live pruner\'s: left to it');
  t.ok(fs.existsSync(kept), 'a claim of a day still kept is left');
  t.ok(fs.existsSync(other), 'a name that is not a claim is left');
  t.same(fs.readdirSync(archive).sort(), [path.basename(live), path.basename(kept), '.pruning-notaday'].sort(), 'no claim of this pass left either');
});
