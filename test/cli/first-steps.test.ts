import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startApi } from '../helpers/api.ts';
import { CLI_ARGS, ROOT, runChild, tempDir } from '../helpers/server.ts';

// The README's "First steps" block, run as written (issue 39 item 7): a newcomer pastes it into
// a shell and gets a verdict. Only what differs in a test is replaced: `npm run cli` by the same
// CLI run directly (npm run would rebuild dist/ in a shared tree) and the address of the
// server, which here listens on an ephemeral port. Everything else is the README's text.
// The server is the service's app and engine in process (test/helpers/api.ts: the real app on
// a loopback port over the real LMDB store, which the block's CLI processes write beside it, as
// beside a started server; issue 43: this was a server start). The start line a real start
// prints, and that its URL answers GET / with the console it names, is
// test/service/start-stop.test.ts's, on `npm start`.
const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
const section = readme.slice(readme.indexOf('## First steps'), readme.indexOf('\n## ', readme.indexOf('## First steps') + 5));
const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];

/** The JSON objects printed one after another: the CLI's pretty-printed ones, and curl's,
 * which end without a newline. */
function jsonValues(text: string): any[] {
  const out = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
    } else if (c === '{') {
      if (depth++ === 0) start = i;
    } else if (c === '}' && --depth === 0) {
      out.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return out;
}

const server = await startApi({ engine: 'real', ready: true });
t.teardown(() => server.stop());

t.test('GET / answers where things are', async (t) => {
  const root = await fetch(`${server.baseUrl}/`);
  t.equal(root.status, 200, 'not a 404');
  const body = await root.json();
  t.match(body, { console: '/admin', openapi: '/openapi.json', health: '/health/ready', docs: /README\.md/ });
  for (const path of [body.console, body.openapi, body.health]) t.equal((await fetch(`${server.baseUrl}${path}`)).status, 200, `${path} answers`);
  t.equal((await fetch(`${server.baseUrl}/nothing-here`)).status, 404, 'other paths stay 404');
});

t.test('the README\'s first steps, pasted into sh, end with a charged verdict', async (t) => {
  t.ok(block, 'the section has a sh block');
  t.match(block!, 'npm run cli --silent -- capture', 'it makes a capture');
  t.notMatch(block!, /uuidgen|<sha256|Bearer lvk_/, 'no placeholder to fill in by hand, no uuidgen');
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  // tsx resolved from here: the shell runs in a folder of its own, as a newcomer's would be
  const cli = [process.execPath, ...CLI_ARGS.map((a) => (a === 'tsx' ? import.meta.resolve('tsx') : /\.(ts|js)$/.test(a) ? path.join(ROOT, a) : a))].map(quote).join(' ');
  const script = block!.replaceAll('npm run cli --silent --', cli).replaceAll('http://127.0.0.1:8080', server.baseUrl);
  const cwd = tempDir();
  const r = await runChild('sh', ['-e', '-c', script], {
    cwd,
    // INIT_CWD: what `npm run` sets to the folder it was typed in
    env: { ...process.env, ...server.env, DATA_DIR: server.dataDir, HOST: '127.0.0.1', PORT: String(server.port), INIT_CWD: cwd },
    limitMs: 180_000,
  });
  t.equal(r.code, 0, r.stderr);
  const answers = jsonValues(r.stdout);
  t.equal(answers.length, 3, 'user create, /v1/me and verify answered JSON', { stdout: r.stdout });
  t.match(answers[1], { token: { name: 'kiosk-17' }, usage: [{ module_id: 'color_liveness' }, { module_id: 'rgb_liveness', used: 0 }] }, 'GET /v1/me with the token kept in LV_TOKEN');
  const verdict = answers[2];
  t.match(verdict, { module_id: 'rgb_liveness', charged_units: 1, results: [{ status: /^(ok|retry)$/ }] }, 'the verify call answered 200 with a result, one unit charged');
  t.ok(fs.existsSync(path.join(cwd, 'crop.png')), 'crop.png is where the shell was');
});
