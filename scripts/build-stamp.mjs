// `npm start` builds only when the build's inputs changed since the last build (a no-op
// rebuild cost 10-15 s of every start). The inputs are hashed by content, not by mtime, so
// a checkout or copy that touches every file without changing one does not rebuild, and an
// edit always does.
//   node scripts/build-stamp.mjs check   exit 0 when dist/ matches the inputs, 1 when not
//   node scripts/build-stamp.mjs begin   before a build: forget the stamp, note the inputs' hash
//   node scripts/build-stamp.mjs write   after it: record the inputs dist/ was built from
//   node scripts/build-stamp.mjs start   build when needed (what prestart runs)
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const INPUTS = ['src', 'workers', 'scripts/bundle.mjs', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

function* files(root, rel) {
  const full = join(root, rel);
  if (!existsSync(full)) return;
  const entries = readdirSync(full, { withFileTypes: true });
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const p = join(rel, e.name);
    if (e.isDirectory()) yield* files(root, p);
    else if (e.isFile()) yield p;
  }
}

/** Content hash of every build input under `root` (paths and bytes). */
export function inputHash(root) {
  const h = createHash('sha256');
  for (const input of INPUTS) {
    const full = join(root, input);
    if (!existsSync(full)) continue;
    const list = statSync(full).isDirectory() ? [...files(root, input)] : [input];
    for (const f of list) {
      h.update(`${f}\0`);
      h.update(readFileSync(join(root, f)));
      h.update('\0');
    }
  }
  return h.digest('hex');
}

/** Each thread's entry and the bundle scripts/bundle.mjs writes for it in dist/src/ (that
 * script says why): the one list the bundler, this stamp and the tests read. */
export const BUNDLES = [
  { entry: 'src/worker.ts', bundle: 'worker.bundle.mjs' },
  { entry: 'src/main.ts', bundle: 'main.bundle.mjs' },
  // the CLI's program (main.ts is the CLI as a call, which tests run in-process); the documented
  // dist/src/cli/main.js loads this bundle (bundle.mjs)
  { entry: 'src/cli/bin.ts', bundle: 'cli.bundle.mjs' },
  { entry: 'workers/inference.ts', bundle: 'inference.bundle.mjs' },
  { entry: 'workers/backend-probe.ts', bundle: 'backend-probe.bundle.mjs' },
  // the LMDB metering writer, one thread per service process (src/store/lmdb/writer.ts)
  { entry: 'src/store/lmdb/writer-thread.ts', bundle: 'lmdb-writer.bundle.mjs' },
  // loaded by an API worker only when tracing is on (src/observability/tracing.ts)
  { entry: 'src/observability/tracing-sdk.ts', bundle: 'tracing.bundle.mjs' },
];

/** What the build writes that the service and the CLI start from: a build missing one of
 * them is stale whatever the stamp says. */
export const BUILD_OUTPUTS = ['dist/src/main.js', 'dist/src/cli/main.js', ...BUNDLES.map((b) => `dist/src/${b.bundle}`)];

const stampFile = (root) => join(root, 'dist', '.build-inputs');
// The inputs are hashed when the build begins, not when it ends: a source edited while tsc and
// the bundler ran was maybe not read by them, and a hash taken at the end would stamp it as
// built (the tests' engine threads and every start trust the stamp: bench/harness/from-build.ts).
// The stamp itself is removed at the start, so a build that fails or is killed leaves none.
const pendingFile = (root) => join(root, 'dist', '.build-inputs.pending');

export function upToDate(root) {
  if (!BUILD_OUTPUTS.every((f) => existsSync(join(root, f)))) return false;
  try {
    return readFileSync(stampFile(root), 'utf8').trim() === inputHash(root);
  } catch {
    return false;
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = process.env.BUILD_ROOT ?? join(dirname(fileURLToPath(import.meta.url)), '..');
  const verb = process.argv[2];
  if (verb === 'check') process.exit(upToDate(root) ? 0 : 1);
  else if (verb === 'begin') {
    mkdirSync(join(root, 'dist'), { recursive: true });
    rmSync(stampFile(root), { force: true });
    writeFileSync(pendingFile(root), `${inputHash(root)}\n`);
  } else if (verb === 'write') {
    // the hash noted at `begin`; a build run without it (an old script) hashes now
    const pending = existsSync(pendingFile(root)) ? readFileSync(pendingFile(root), 'utf8').trim() : inputHash(root);
    writeFileSync(stampFile(root), `${pending}\n`);
    rmSync(pendingFile(root), { force: true });
  }
  else if (verb === 'start') {
    if (upToDate(root)) process.exit(0);
    process.stderr.write('sources changed since the last build: building (npm run build)\n');
    const r = spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
    process.exit(r.status ?? 1);
  } else {
    process.stderr.write('usage: node scripts/build-stamp.mjs check|begin|write|start\n');
    process.exit(2);
  }
}
