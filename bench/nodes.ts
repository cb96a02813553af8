// Several nodes on one PostgreSQL (issue 11): end-to-end captures/s with 1, 2 and 3 service
// nodes on one database, each node its own compiled process (as `npm start` runs it), and a
// verify call's p50 on LMDB against PostgreSQL at low concurrency (what the store adds).
// The graph is the peers' tiny128 (deployed by manifest, as bench/side-by-side.mjs does), the
// client the peers' load.mjs. All nodes share this host's cores, so the node ratios say what
// the shared store costs the nodes together, not what more machines would add.
//
//   npm run build && node --import tsx bench/nodes.ts [--quick] [--kind single-rgb8] [--seconds 8]
//
// PEERS_DIR: a copy of ../shared/peers (the default). Writes bench/results/nodes.{json,md}.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startPostgres } from './harness/postgres.ts';
// @ts-expect-error plain JavaScript module without types
import { PRODUCTION_ENV } from './production-env.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PEERS = path.resolve(process.env.PEERS_DIR ?? path.join(ROOT, '../shared/peers'));
const quick = process.argv.includes('--quick');
const argOf = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const KIND = argOf('kind', 'single-rgb8');
const SECONDS = Number(argOf('seconds', quick ? '3' : '8'));
const ROUNDS = quick ? 1 : 3;
const PER_NODE_CONCURRENCY = 2;
const main = path.join(ROOT, 'dist/src/main.js');
const cliMain = path.join(ROOT, 'dist/src/cli/main.js');
if (!fs.existsSync(main)) {
  console.error('bench/nodes.ts runs the compiled service: `npm run build` first');
  process.exit(2);
}

function modelsDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-nodes-models-'));
  const set = path.join(dir, 'tiny128');
  fs.mkdirSync(set);
  fs.copyFileSync(path.join(PEERS, 'model/tiny128.onnx'), path.join(set, 'tiny128.onnx'));
  const manifest = JSON.parse(fs.readFileSync(path.join(PEERS, 'model/tiny128.manifest.json'), 'utf8'));
  for (const g of manifest.modules.rgb_liveness.graphs) g.resize = 'bilinear';
  fs.writeFileSync(path.join(set, 'manifest.json'), JSON.stringify(manifest));
  return dir;
}

function cli(env: NodeJS.ProcessEnv, args: string[]): any {
  const r = spawnSync(process.execPath, [cliMain, ...args], { cwd: ROOT, env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`cli ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

interface Node { proc: ChildProcess; base: string }

async function startNode(env: NodeJS.ProcessEnv, port: number): Promise<Node> {
  const proc = spawn(process.execPath, [main], { cwd: ROOT, env: { ...env, HOST: '127.0.0.1', PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d) => (err += d));
  const base = `http://127.0.0.1:${port}`;
  for (const end = Date.now() + 240_000; ; ) {
    if (proc.exitCode !== null) throw new Error(`node exited: ${err}`);
    const r = await fetch(`${base}/health/ready`).catch(() => null);
    if (r?.status === 200) return { proc, base };
    if (Date.now() > end) throw new Error('node not ready');
    await new Promise((res) => setTimeout(res, 250));
  }
}

async function stopNode(n: Node): Promise<void> {
  if (n.proc.exitCode !== null) return;
  const gone = new Promise((r) => n.proc.once('exit', r));
  n.proc.kill('SIGTERM');
  await gone;
}

/** load.mjs against each node at once; captures/s summed, p50 of the nodes' p50s */
function load(nodes: Node[], token: string, concurrency: number): Promise<{ captures_per_s: number; p50_ms: number; non_200: number }> {
  return Promise.all(nodes.map((n) => new Promise<any>((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(PEERS, 'load.mjs'), '--base', n.base, '--token', token, '--module', 'rgb_liveness', '--kind', KIND,
      '--concurrency', String(concurrency), '--seconds', String(SECONDS), '--warmup', '1'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    p.stdout!.on('data', (d) => (out += d));
    p.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`load.mjs exited ${code}`))));
  }))).then((rs) => ({
    captures_per_s: Math.round(rs.reduce((a, r) => a + r.captures_per_s, 0) * 10) / 10,
    p50_ms: rs.map((r) => r.p50_ms).sort((a, b) => a - b)[Math.floor(rs.length / 2)],
    non_200: rs.reduce((a, r) => a + Object.values(r.non200_by_status as Record<string, number>).reduce((x, y) => x + y, 0), 0),
  }));
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const models = modelsDir();
const pg = await startPostgres();
const common = { ...process.env, ...PRODUCTION_ENV, MODELS_DIR: models, MODEL_SET: 'tiny128', LOG_LEVEL: 'warn', WORKERS: '1', INFERENCE_THREADS: '1', WARMUP_RUNS: '30' };
const report: any = { at: new Date().toISOString(), host: `${os.cpus().length} cores`, kind: KIND, seconds: SECONDS, rounds: ROUNDS, nodes: [], store_p50: {} };
try {
  // 1, 2 and 3 nodes on one database, each WORKERS=1 and INFERENCE_THREADS=1
  const pgEnv = { ...common, DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'lv-nodes-data-')), DATABASE_URL: await pg.database('nodes') };
  cli(pgEnv, ['module', 'disable', 'color_liveness']);
  const pgToken = cli(pgEnv, ['token', 'create', '--name', 'bench', '--grant', 'rgb_liveness:unlimited:never']).token as string;
  const nodes: Node[] = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(await startNode({ ...pgEnv, DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'lv-nodes-data-')) }, 18600 + i));
  }
  for (const n of [1, 2, 3]) {
    const runs = [];
    for (let r = 0; r < ROUNDS; r++) runs.push(await load(nodes.slice(0, n), pgToken, PER_NODE_CONCURRENCY));
    report.nodes.push({ nodes: n, captures_per_s: median(runs.map((x) => x.captures_per_s)), p50_ms: median(runs.map((x) => x.p50_ms)), non_200: runs.reduce((a, x) => a + x.non_200, 0), runs: runs.map((x) => x.captures_per_s) });
    console.error(`nodes ${n}: ${JSON.stringify(report.nodes.at(-1))}`);
  }
  for (const n of nodes) await stopNode(n);
  const one = report.nodes[0].captures_per_s;
  for (const row of report.nodes) row.ratio_to_one = Math.round((row.captures_per_s / one) * 100) / 100;

  // one node, concurrency 1: a verify call's p50 on LMDB and on PostgreSQL, interleaved
  const lmdbEnv = { ...common, WORKERS: '2', INFERENCE_THREADS: '2', DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'lv-nodes-data-')) };
  cli(lmdbEnv, ['module', 'disable', 'color_liveness']);
  const lmdbToken = cli(lmdbEnv, ['token', 'create', '--name', 'bench', '--grant', 'rgb_liveness:unlimited:never']).token as string;
  const lmdbNode = await startNode(lmdbEnv, 18610);
  const pgNode = await startNode({ ...pgEnv, WORKERS: '2', INFERENCE_THREADS: '2' }, 18611);
  const p50 = { lmdb: [] as number[], postgres: [] as number[] };
  for (let r = 0; r < ROUNDS; r++) {
    p50.lmdb.push((await load([lmdbNode], lmdbToken, 1)).p50_ms);
    p50.postgres.push((await load([pgNode], pgToken, 1)).p50_ms);
  }
  await stopNode(lmdbNode);
  await stopNode(pgNode);
  report.store_p50 = { lmdb_ms: median(p50.lmdb), postgres_ms: median(p50.postgres), postgres_minus_lmdb_ms: Math.round((median(p50.postgres) - median(p50.lmdb)) * 100) / 100, runs: p50 };
} finally {
  await pg.stop();
  fs.rmSync(models, { recursive: true, force: true });
}

const md = [
  `# Nodes on one PostgreSQL (${report.at})`,
  '',
  `Command: \`npm run build && node --import tsx bench/nodes.ts${process.argv.slice(2).length ? ` ${process.argv.slice(2).join(' ')}` : ''}\`. ` +
    `Kind ${KIND} (../shared/peers/load.mjs), tiny128 graph, each node WORKERS=1 and INFERENCE_THREADS=1, ${PER_NODE_CONCURRENCY} connections per node, ` +
    `medians of ${ROUNDS} run(s) of ${SECONDS} s. All nodes and the database share one ${report.host} host.`,
  '',
  '| nodes | captures/s | ratio to one node | p50 ms | non-200 |',
  '|---|---|---|---|---|',
  ...report.nodes.map((r: any) => `| ${r.nodes} | ${r.captures_per_s} | ${r.ratio_to_one} | ${r.p50_ms} | ${r.non_200} |`),
  '',
  `A verify call's p50 at concurrency 1 (one node, WORKERS=2): LMDB ${report.store_p50.lmdb_ms} ms, PostgreSQL ${report.store_p50.postgres_ms} ms: the shared store adds ${report.store_p50.postgres_minus_lmdb_ms} ms (target: at most 2 ms).`,
  '',
];
const out = path.join(ROOT, 'bench/results', quick ? 'nodes-quick' : 'nodes');
fs.writeFileSync(`${out}.json`, `${JSON.stringify(report, null, 2)}\n`);
fs.writeFileSync(`${out}.md`, md.join('\n'));
console.log(md.join('\n'));
