// startPostgres() (bench/harness/postgres.ts) guards its server: postgres does not end with the
// process that started it, so a test file killed before its stop() used to leave a server running
// (memory, a port) and its folder in the temporary folder.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import readline from 'node:readline';
import t from 'tap';
import { ROOT } from './server.ts';
import { waitFor } from './wait.ts';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

t.test('a test process killed with its PostgreSQL running: the server ends and its folder goes', async (t) => {
  const script = [
    "import fs from 'node:fs';",
    "import { startPostgres } from './bench/harness/postgres.ts';",
    'const pg = await startPostgres();',
    "const pid = Number(fs.readFileSync(pg.dataDir + '/postmaster.pid', 'utf8').split('\\n')[0]);",
    "process.stdout.write(JSON.stringify({ pid, dir: pg.dataDir }) + '\\n');",
    // kept alive until killed
    'setInterval(() => {}, 60_000);',
  ].join('\n');
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill('SIGKILL'));
  const [line] = (await once(readline.createInterface({ input: child.stdout! }), 'line')) as [string];
  const { pid, dir } = JSON.parse(line) as { pid: number; dir: string };
  t.ok(alive(pid) && fs.existsSync(dir), `the child's server runs (postmaster ${pid})`);
  child.kill('SIGKILL');
  await once(child, 'exit');
  await waitFor(() => !alive(pid), { what: `postmaster ${pid} to end` });
  await waitFor(() => !fs.existsSync(dir), { what: `${dir} to be removed` });
  t.pass('no server left, no folder');
});
