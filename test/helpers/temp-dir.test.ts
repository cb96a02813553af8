// tempDir() removes what it made when the process exits (bench/harness/server.ts): the suite
// makes a few hundred data directories, and before this it left every one in /tmp.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from './server.ts';

function makeDirInChild(env: Record<string, string>): string {
  const script = "import fs from 'node:fs'; import { tempDir } from './bench/harness/server.ts'; const d = tempDir('lv-tempdir-check-'); fs.writeFileSync(d + '/f', 'x'); process.stdout.write(d);";
  return execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
}

t.test('a temporary directory is removed when its process exits', async (t) => {
  const dir = makeDirInChild({ LV_KEEP_TEMP: '' });
  t.ok(path.isAbsolute(dir) && dir.includes('lv-tempdir-check-'), `the child made ${dir}`);
  t.notOk(fs.existsSync(dir), 'gone after the process exited');
});

t.test('LV_KEEP_TEMP=1 keeps it for a post-mortem', async (t) => {
  const dir = makeDirInChild({ LV_KEEP_TEMP: '1' });
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  t.ok(fs.existsSync(path.join(dir, 'f')), 'kept, with its file');
});
