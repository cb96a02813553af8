import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { runCli, tempDir } from '../helpers/server.ts';
import { missingTool } from '../helpers/required.ts';

// A backup whose disk fills while the signing keys are copied (the store's copy fits, the keys do
// not) leaves nothing: the store file used to take its final name first, beside a keys folder
// without `current`, a backup that could be neither made again (the name exists) nor restored.
// The tmpfs is sized to the store's copy exactly, measured by a first backup elsewhere.
const root = process.getuid?.() === 0;
if (!root) {
  missingTool(t, 'needs root to mount a tmpfs (run as root, as CI does)');
} else {
  t.test('a disk that fills while the keys are copied: exit 2 with the reason, nothing left under the name', async (t) => {
    const dataDir = tempDir();
    t.equal((await runCli(dataDir, ['token', 'create', '--name', 'full', '--grant', 'rgb_liveness:1:never'])).code, 0);
    t.equal((await runCli(dataDir, ['keys', 'rotate'])).code, 0, 'a signing key to copy');
    const ref = path.join(tempDir(), 'ref.mdb');
    const first = await runCli(dataDir, ['backup', ref]);
    t.equal(first.code, 0, first.stderr);
    const mnt = tempDir('lv-backup-full-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${fs.statSync(ref).size}`, 'tmpfs', mnt], { stdio: 'pipe' });
    t.teardown(() => execFileSync('umount', ['-l', mnt], { stdio: 'pipe' }));
    const target = path.join(mnt, 'x.mdb');
    const full = await runCli(dataDir, ['backup', target]);
    t.equal(full.code, 2, `refused in one line: ${full.stderr.trim()}`);
    t.match(full.stderr, /backup to .*x\.mdb failed: ENOSPC.*; nothing was written/);
    t.same(fs.readdirSync(mnt), [], 'nothing under the name, nor a scratch folder');
  });

  // The store's copy itself does not fit: lmdb-js threw its failure without a code, and the
  // backup ended as an unexpected error (exit 1, a bare "No space left on device").
  t.test('a disk that fills while the store is copied: exit 2 with the reason, nothing left', async (t) => {
    const dataDir = tempDir();
    t.equal((await runCli(dataDir, ['token', 'create', '--name', 'full', '--grant', 'rgb_liveness:1:never'])).code, 0);
    const ref = path.join(tempDir(), 'ref.mdb');
    const first = await runCli(dataDir, ['backup', ref]);
    t.equal(first.code, 0, first.stderr);
    const mnt = tempDir('lv-backup-full-');
    // half the copy (tmpfs rounds it up to whole pages)
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${Math.floor(fs.statSync(ref).size / 2)}`, 'tmpfs', mnt], { stdio: 'pipe' });
    t.teardown(() => execFileSync('umount', ['-l', mnt], { stdio: 'pipe' }));
    const full = await runCli(dataDir, ['backup', path.join(mnt, 'x.mdb')]);
    t.equal(full.code, 2, `refused in one line: ${full.stderr.trim()}`);
    t.match(full.stderr, /backup to .*x\.mdb failed while the store was copied: No space left on device; nothing was written/);
    t.same(fs.readdirSync(mnt), [], 'nothing under the name, nor a scratch folder');
  });
}
