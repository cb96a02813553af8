import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { startApi } from '../helpers/api.ts';
import { ROOT, makeToken, runChild, tempDir } from '../helpers/server.ts';

// The client package as an integrator gets it: built from client/ with tsc, packed with
// `npm pack`, installed from the tarball into an empty project with no registry access, then
// used from plain JavaScript (against the running service) and type-checked from TypeScript.

/** Runs a program to its end (runChild: no tap instrumentation in it) and resolves with its
 * stdout; a failure, or a run past `limitMs` (killed), rejects with what it printed and
 * `context()`, so a program that stops says where instead of holding the file until tap's
 * timeout. */
async function run(command: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; limitMs?: number } = {}, context = () => ''): Promise<{ stdout: string }> {
  const r = await runChild(command, args, opts);
  if (r.code === 0) return { stdout: r.stdout };
  const how = r.timedOut ? `was killed after ${opts.limitMs} ms; its threads then:\n${r.threads ?? ''}` : `ended with ${r.signal ?? `exit ${r.code}`}`;
  throw new Error(`${path.basename(command)} ${args.join(' ')} ${how}\nits stdout:\n${r.stdout}\nits stderr:\n${r.stderr}\n${context()}`);
}

// npm, tsc, the linter and the generator are whole programs: on a loaded
// 2-core machine the file needs more than the suite's 240 s default, so it asks for more
t.setTimeout(480_000);
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');
// Every tsc run below skips checking TypeScript's own lib files (lib.*.d.ts: DOM's alone is
// 1.5 MB), which were half of each run's CPU and say nothing about the package: the package's
// sources, the consumer's code and the package's installed declarations are checked in full
// (skipDefaultLibCheck, unlike skipLibCheck, leaves node_modules' .d.ts checked; issue 43).
const NO_DEFAULT_LIB_CHECK = '--skipDefaultLibCheck';
const npm = (args: string[], cwd: string) => run('npm', args, { cwd, env: { ...process.env, npm_config_update_notifier: 'false' } });

const work = tempDir('lv-client-pack-');
t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));

// A copy of the package folder, so that building it never touches the worktree's client/dist
// while other tests read client/src.
const pkgDir = path.join(work, 'pkg');
fs.mkdirSync(pkgDir);
for (const entry of ['package.json', 'tsconfig.json', 'README.md', 'src']) {
  fs.cpSync(path.join(ROOT, 'client', entry), path.join(pkgDir, entry), { recursive: true });
}

// started now so that its start-up overlaps the build and the install
// the service's app (and engine) in process on its real store: test/helpers/api.ts (was one server start)
const serverStarting = startApi({ engine: 'real', ready: true });
serverStarting.catch(() => {}); // a failed start is reported by the subtest that awaits it
t.teardown(async () => (await serverStarting.catch(() => null))?.stop());

let tarball = '';
t.test('the package builds to ESM JavaScript with declarations and packs only dist', async (t) => {
  await run(process.execPath, [TSC, '-p', path.join(pkgDir, 'tsconfig.json'), NO_DEFAULT_LIB_CHECK]);
  const { stdout } = await npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], pkgDir);
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  tarball = path.join(work, info!.filename);
  const files = info!.files.map((f) => f.path).sort();
  t.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts'), 'JavaScript and declarations are in');
  t.notOk(files.some((f) => f.startsWith('src/') || f.endsWith('.ts') && !f.endsWith('.d.ts')), 'no TypeScript sources');
  for (const f of files.filter((f) => f.endsWith('.js'))) {
    const text = fs.readFileSync(path.join(pkgDir, f), 'utf8');
    t.notMatch(text, /from ["'](node:|\.\.\/\.\.)/, `${f} imports neither node: modules nor the service`);
    t.notMatch(text, /\bBuffer\b/, `${f} does not use Buffer`);
  }
});

const app = path.join(work, 'app');
t.test('installs from the tarball offline into an empty project', async (t) => {
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
  await npm(['install', '--offline', '--no-audit', '--no-fund', tarball], app);
  const installed = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/@liveness-service/client/package.json'), 'utf8'));
  t.same(Object.keys(installed.dependencies ?? {}), [], 'no runtime dependencies');
});

t.test('plain JavaScript: crop, build and verify against the running service', { timeout: 240_000 }, async (t) => {
  // Once, in a clean-clone CI run on a loaded host, this test stopped somewhere below and held
  // the file until tap killed it 480 s later, leaving no trace of where: each step now has a
  // comment, the client program reports its own progress and is killed after two minutes, and
  // the subtest's own limit ends a wait elsewhere (the server's start, the token) with a failure.
  const server = await serverStarting;
  t.comment('server ready');
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  t.comment('token made');
  fs.writeFileSync(path.join(app, 'verify.mjs'), `
import { eyeCrop320, buildCapture, createVerifyClient, RGB8_BYTES } from '@liveness-service/client';
const width = 640, height = 480;
const rgb = new Uint8Array(width * height * 3);
for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 7) & 255;
const eyes = [[280, 200], [360, 202]];
const crop = eyeCrop320({ data: rgb, width, height }, eyes);
if (crop.length !== RGB8_BYTES) throw new Error('crop size ' + crop.length);
const { metadata, files } = await buildCapture({ mode: 'rgb_single', capture_id: 'pkg-js-1',
  frames: [{ timestamp_us: 0, source_size: [width, height], eyes_xy: eyes, image: { bytes: crop } }] });
const client = createVerifyClient({ baseUrl: process.env.BASE_URL, token: process.env.TOKEN });
console.error('verify sent');
const outcome = await client.verify('rgb_liveness', metadata, files);
console.error('verify answered: ' + outcome.kind);
const me = await client.me();
console.error('me answered: ' + me.kind);
console.log(JSON.stringify({ outcome, me, sha256: metadata.frames[0].image.sha256 }));
`);
  const serverTail = () => `the server's last log lines:\n${server.logs.slice(-20).join('\n')}`;
  const { stdout } = await run(process.execPath, ['verify.mjs'], { cwd: app, env: { ...process.env, BASE_URL: server.baseUrl, TOKEN: token }, limitMs: 120_000 }, serverTail);
  const { outcome, me, sha256 } = JSON.parse(stdout);
  t.equal(outcome.kind, 'completed', stdout);
  t.equal(outcome.response.charged_units, 1);
  t.equal(outcome.verdicts[0].capture_id, 'pkg-js-1');
  t.match(outcome.verdicts[0].verdict, /^(live|not_live|retry)$/);
  t.match(sha256, /^[0-9a-f]{64}$/);
  t.equal(me.kind, 'ok');
  t.equal(me.value.usage[0].used, 1, 'the service charged the one capture, as client.me() reads');
});

const TS_APP = `
import { buildCapture, createVerifyClient, eyeCrop320, type VerifyOutcome } from '@liveness-service/client';

export async function check(baseUrl: string, token: string): Promise<string> {
  const crop: Uint8Array = eyeCrop320({ data: new Uint8Array(12), width: 2, height: 2 }, [[0, 0], [1, 0]]);
  const built = await buildCapture({ mode: 'rgb_single', frames: [{ timestamp_us: 0, source_size: [2, 2], eyes_xy: [[0, 0], [1, 0]], image: { bytes: crop } }] });
  const outcome: VerifyOutcome = await createVerifyClient({ baseUrl, token }).verify('rgb_liveness', built.metadata, built.files);
  // @ts-expect-error the module ids are a closed set
  createVerifyClient({ baseUrl, token }).verify('no_such_module', built.metadata, built.files);
  return outcome.kind === 'completed' ? outcome.verdicts[0]!.verdict : outcome.code;
}
`;

// The @ts-expect-error line in TS_APP is itself an error when the declarations read as `any`,
// so a passing check also proves the types are real.
t.test('TypeScript: a fresh `tsc --init` project and a CommonJS one both type-check a call', async (t) => {
  fs.writeFileSync(path.join(app, 'app.ts'), TS_APP);
  // `tsc --init` writes the settings a new project starts from (TypeScript 5.9: NodeNext,
  // strict, exactOptionalPropertyTypes, noUncheckedIndexedAccess, no @types); the library
  // check is turned back on so that the package's own declarations are checked too.
  await run(process.execPath, [TSC, '--init'], { cwd: app });
  await t.resolves(run(process.execPath, [TSC, '--noEmit', '-p', 'tsconfig.json', '--skipLibCheck', 'false', NO_DEFAULT_LIB_CHECK], { cwd: app }), 'tsc --init defaults');
  // older projects: CommonJS output with node10 resolution finds the top-level "types"
  await t.resolves(run(process.execPath, [TSC, '--noEmit', '--strict', '--module', 'commonjs', '--target', 'es2022', NO_DEFAULT_LIB_CHECK, 'app.ts'], { cwd: app }), 'CommonJS, node10 resolution');
});
