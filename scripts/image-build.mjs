// npm run image:build: the OCI image localhost/liveness-service:<version> (docs/container.md).
//
// The image holds the compiled build, its production dependencies and a Node 24 binary, on a
// Debian 13 base. Everything is prepared here, in .image/, and the Containerfile only copies
// it: so the image needs no compiler, no npm and no network while it builds, and the build
// works where no image registry is reachable.
//
//   IMAGE_BASE=<image>        base image (default: a Debian 13 minbase built here with
//                             mmdebstrap and imported as localhost/liveness-base:trixie)
//   CONTAINER_ENGINE=podman|docker   default: podman when installed, else docker
//   IMAGE_TAG=<name:tag>      default localhost/liveness-service:<package version>
//   --postgres                also build localhost/liveness-postgres:17 (deploy/compose.yaml)
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const stage = join(root, '.image');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

// Node comes from npm's node-linux-<arch> package, pinned by version and by the registry's
// integrity hash so a republished tarball is refused rather than built in.
export const NODE = {
  version: '24.21.0',
  integrity: { x64: 'sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==' },
};
export const DEFAULT_BASE = 'localhost/liveness-base:trixie';
export const IMAGE_TAG = process.env.IMAGE_TAG || `localhost/liveness-service:${pkg.version}`;

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { stdio: opts.capture ? ['ignore', 'pipe', 'inherit'] : 'inherit', cwd: opts.cwd ?? root, encoding: 'utf8', env: opts.env ?? process.env });
  if (r.status !== 0 && !opts.allowFail) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status ?? r.signal}`);
  return r;
}

function has(cmd) {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

export function containerEngine() {
  if (process.env.CONTAINER_ENGINE) return process.env.CONTAINER_ENGINE;
  if (has('podman')) return 'podman';
  // the docker CLI alone answers --version without a daemon; only a daemon can build
  if (has('docker') && spawnSync('docker', ['info'], { stdio: 'ignore' }).status === 0) return 'docker';
  throw new Error('neither podman nor a running docker found (Debian: apt-get install podman runc)');
}

function imageExists(engine, ref) {
  return spawnSync(engine, ['image', 'inspect', ref], { stdio: 'ignore' }).status === 0;
}

/** Debian 13 minbase from Debian's own packages: the same base on every host, without a
 * registry. `include`: ca-certificates for the service (an outgoing TLS connection, PostgreSQL
 * with sslmode, verifies its peer); postgresql-17 for the database image. */
function ensureDebianBase(engine, ref, include) {
  if (imageExists(engine, ref)) return ref;
  if (!has('mmdebstrap')) throw new Error(`no base image ${ref} and no mmdebstrap to build it: apt-get install mmdebstrap, or set IMAGE_BASE`);
  mkdirSync(stage, { recursive: true });
  const tar = join(stage, 'base.tar');
  run('mmdebstrap', [
    '--variant=minbase', `--include=${include}`, '--quiet',
    '--dpkgopt=path-exclude=/usr/share/doc/*', '--dpkgopt=path-exclude=/usr/share/man/*', '--dpkgopt=path-exclude=/usr/share/locale/*',
    'trixie', tar,
  ]);
  run(engine, ['import', tar, ref], { capture: true });
  rmSync(tar);
  return ref;
}

export function ensureBase(engine) {
  return process.env.IMAGE_BASE || ensureDebianBase(engine, DEFAULT_BASE, 'ca-certificates');
}

/** HEALTHCHECK is part of the Docker image format only: podman's default OCI format drops
 * it. RUN steps use runc where it is installed: crun fails on hosts with hybrid cgroups
 * (PODMAN_RUNTIME chooses another). */
function podmanFlags(engine) {
  if (engine !== 'podman') return [];
  const runtime = process.env.PODMAN_RUNTIME || (has('runc') ? 'runc' : null);
  return ['--format', 'docker', ...(runtime ? ['--runtime', runtime] : [])];
}

export const POSTGRES_TAG = 'localhost/liveness-postgres:17';

/** The PostgreSQL of deploy/compose.yaml and the image test, built the same offline way. */
export function buildPostgresImage() {
  const engine = containerEngine();
  const base = ensureDebianBase(engine, 'localhost/liveness-postgres-base:trixie', 'postgresql-17');
  const format = podmanFlags(engine);
  run(engine, ['build', ...format, '--quiet', '--file', join(root, 'deploy/container/postgres.Containerfile'), '--build-arg', `BASE=${base}`, '--tag', POSTGRES_TAG, join(root, 'deploy/container')], { capture: true });
  process.stdout.write(`built ${POSTGRES_TAG} with ${engine}\n`);
  return { engine, tag: POSTGRES_TAG };
}

const arch = { x64: 'x64', arm64: 'arm64' }[process.arch];

/** Everything the image copies: app/ (dist, models, production node_modules) and node/. */
function stageApp() {
  // builds only when an input changed (the same check as npm start)
  run('node', ['scripts/build-stamp.mjs', 'start']);
  rmSync(join(stage, 'app'), { recursive: true, force: true });
  const app = join(stage, 'app');
  mkdirSync(app, { recursive: true });
  for (const f of ['dist', 'models', 'package.json', 'package-lock.json', '.npmrc']) cpSync(join(root, f), join(app, f), { recursive: true });
  rmSync(join(app, 'models', 'builder'), { recursive: true, force: true });
  // --ignore-scripts: the root's prepare would compile again, with dev tools that are omitted
  // here; no production dependency needs an install script (lmdb's binary comes prebuilt in
  // @lmdb/lmdb-linux-<arch>, onnxruntime-node's in its package).
  run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app });
  const nm = join(app, 'node_modules');
  // tsx runs TypeScript in development only; 20.30 has no binding for Node 24 (docs/platforms.md)
  for (const gone of ['tsx', 'esbuild', '@esbuild', '@trufflesuite', 'ws', 'bufferutil', 'utf-8-validate']) rmSync(join(nm, gone), { recursive: true, force: true });
  // native bindings for other systems are most of the image's size and never load here
  const uws = join(nm, '@btc-vision', 'uwebsockets.js');
  for (const f of readdirSync(uws)) if (f.endsWith('.node') && !f.startsWith(`uws_linux_${arch}_`)) rmSync(join(uws, f));
  const ort = join(nm, 'onnxruntime-node', 'bin', 'napi-v6');
  if (existsSync(ort)) {
    for (const os of readdirSync(ort)) if (os !== 'linux') rmSync(join(ort, os), { recursive: true });
    for (const a of readdirSync(join(ort, 'linux'))) if (a !== arch) rmSync(join(ort, 'linux', a), { recursive: true });
  }
  const gpu = join(nm, 'webgpu', 'dist');
  if (existsSync(gpu)) for (const d of readdirSync(gpu)) if (d !== `linux-${arch}`) rmSync(join(gpu, d), { recursive: true });
}

function stageNode() {
  const dir = join(stage, 'node');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const r = run('npm', ['pack', `node-linux-${arch}@${NODE.version}`, '--pack-destination', dir, '--json', '--loglevel=error'], { capture: true });
  const [{ filename }] = JSON.parse(r.stdout);
  const tgz = join(dir, filename);
  const integrity = `sha512-${createHash('sha512').update(readFileSync(tgz)).digest('base64')}`;
  if (integrity !== NODE.integrity[arch]) throw new Error(`node-linux-${arch}@${NODE.version}: integrity ${integrity}, pinned ${NODE.integrity[arch]}`);
  run('tar', ['-xzf', tgz, '-C', dir, '--strip-components=1', 'package/bin/node']);
  rmSync(tgz);
  chmodSync(join(dir, 'bin', 'node'), 0o755);
}

export function buildImage() {
  if (!arch) throw new Error(`no image for ${process.arch}`);
  const engine = containerEngine();
  const base = ensureBase(engine);
  stageApp();
  stageNode();
  // only the binding of the image's Node ABI can load in the image
  const abi = run(join(stage, 'node', 'bin', 'node'), ['-p', 'process.versions.modules'], { capture: true }).stdout.trim();
  const uws = join(stage, 'app', 'node_modules', '@btc-vision', 'uwebsockets.js');
  for (const f of readdirSync(uws)) if (f.endsWith('.node') && f !== `uws_linux_${arch}_${abi}.node`) rmSync(join(uws, f));
  writeFileSync(join(stage, '.stamp'), `${IMAGE_TAG}\n`);
  const format = podmanFlags(engine);
  run(engine, ['build', ...format, '--file', join(root, 'Containerfile'), '--build-arg', `BASE=${base}`, '--build-arg', `VERSION=${pkg.version}`, '--tag', IMAGE_TAG, stage]);
  const size = Number(run(engine, ['image', 'inspect', '--format', '{{.Size}}', IMAGE_TAG], { capture: true }).stdout.trim());
  process.stdout.write(`built ${IMAGE_TAG} on ${base} with ${engine}: ${(size / 1024 / 1024).toFixed(0)} MiB\n`);
  return { engine, tag: IMAGE_TAG, size };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    buildImage();
    if (process.argv.includes('--postgres')) buildPostgresImage();
  } catch (e) {
    process.stderr.write(`image:build: ${e.message}\n`);
    process.exit(1);
  }
}
