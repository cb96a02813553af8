// npm run soak [-- --quick] [-- --only=kill-loop,fuzz,overload,slow-client] [-- --minutes N]
//              [-- --slow-profile=target|uws_builtin]
// npm run soak -- --minutes N [--store=lmdb|postgres]: the long soak alone (long.ts: mixed
//              traffic at twice the slots for N minutes, the RssAnon plateau judged on the last
//              third, 10 to 20 minutes), its report in bench/results/soak-<N>min-<store>.json with an RSS plot
//              (.svg) beside it. `--only=overload --minutes N` runs the overload scenario N
//              minutes instead, as before. `--server-env=K=V,...` adds to the long soak's server
//              environment (a WORKERS there also sizes the clients: twice its slots) and
//              `--tag=T` names its report soak-<N>min-<store>-<T>.json.
// The reliability suite: each scenario starts its own server on loopback (PORT=0, temporary
// DATA_DIR), runs a bounded count of calls for a bounded time, stops by itself and prints its
// figures; a JSON report goes to bench/results/soak.json (soak-quick.json with --quick).
// Exit code 1 when any guarantee was broken. `--quick` runs the sizes of the tap versions
// (test/service/{kill-loop,fuzz,overload,slow-client}.test.ts); the default sizes are those
// of the issue-15 report.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runFuzz } from './fuzz.ts';
import { runKillLoop } from './kill-loop.ts';
import { runLongSoak, writeMemorySvg } from './long.ts';
import { killAllServers, startServer, type MemorySample, type ScenarioResult } from './lib.ts';
import { runOverload } from './overload.ts';
import { runSlowClient, SLOW_CLIENT_PROFILES } from './slow-client.ts';

const quick = process.argv.includes('--quick');
const only = process.argv.find((a) => a.startsWith('--only='))?.slice(7).split(',');
const slowProfile = (process.argv.find((a) => a.startsWith('--slow-profile='))?.slice(15) ?? 'target') as keyof typeof SLOW_CLIENT_PROFILES;
if (!SLOW_CLIENT_PROFILES[slowProfile]) {
  process.stderr.write(`unknown --slow-profile ${slowProfile}: ${Object.keys(SLOW_CLIENT_PROFILES).join(', ')}\n`);
  process.exit(2);
}
const log = (line: string) => process.stderr.write(`  ${line}\n`);
// --minutes N: the overload scenario runs N minutes (a long soak: the memory line every 10 s
// shows whether RssAnon reaches a plateau); its bound follows
const minutesArg = process.argv.find((a) => a.startsWith('--minutes'));
const minutes = minutesArg === undefined ? null : Number(minutesArg.includes('=') ? minutesArg.slice(10) : process.argv[process.argv.indexOf(minutesArg) + 1]);
if (minutes !== null && !(minutes > 0)) {
  process.stderr.write('--minutes takes a positive number\n');
  process.exit(2);
}
const overloadSeconds = minutes !== null ? Math.round(minutes * 60) : quick ? 15 : 60;
const store = (process.argv.find((a) => a.startsWith('--store='))?.slice(8) ?? 'lmdb') as 'lmdb' | 'postgres';
if (store !== 'lmdb' && store !== 'postgres') {
  process.stderr.write('--store takes lmdb or postgres\n');
  process.exit(2);
}
// --server-env=K=V,K=V: more environment for the long soak's server (a comparison run)
const serverEnv = Object.fromEntries((process.argv.find((a) => a.startsWith('--server-env='))?.slice(13).split(',') ?? []).filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
if (serverEnv.WORKERS !== undefined && !/^[1-9]\d*$/.test(serverEnv.WORKERS)) {
  // it also sizes the clients: a typo would run a soak with none
  process.stderr.write('--server-env=WORKERS= takes a positive whole number\n');
  process.exit(2);
}
const tag = process.argv.find((a) => a.startsWith('--tag='))?.slice(6);
// --minutes alone: the long soak only
const selected = only ?? (minutes !== null ? ['long'] : ['kill-loop', 'fuzz', 'overload', 'slow-client']);

const scenarios: { name: string; boundMs: number; run: () => Promise<ScenarioResult> }[] = [
  {
    name: 'kill-loop',
    boundMs: quick ? 5 * 60_000 : 25 * 60_000,
    run: () => runKillLoop(quick
      ? { cycles: 3, clients: 3, loadMsMin: 800, loadMsMax: 2000, seed: 7, log }
      : { cycles: 30, clients: 6, loadMsMin: 1000, loadMsMax: 4000, seed: 7, log }),
  },
  {
    name: 'fuzz',
    boundMs: quick ? 5 * 60_000 : 25 * 60_000,
    run: () => {
      const serve = () => startServer({ ready: true, env: { WORKERS: '2' } });
      return runFuzz(quick ? { count: 240, seed: 11, stalls: 1, log, serve } : { count: 6000, seed: 11, stalls: 3, log, serve });
    },
  },
  {
    name: 'overload',
    boundMs: overloadSeconds * 1000 + (quick ? 3 * 60_000 : 5 * 60_000),
    run: () => runOverload({ seconds: overloadSeconds, multiplier: 4, rssGrowthLimit: (quick ? 96 : 64) * 1024 * 1024, log }),
  },
  {
    name: 'long',
    // the run, the server's start and the checks at the end (PostgreSQL's start included)
    boundMs: (minutes ?? 1) * 60_000 + 10 * 60_000,
    // a WORKERS given to the server also sizes the clients (twice its slots), as for the default
    run: () => runLongSoak({ minutes: minutes ?? 1, store, log, env: serverEnv, ...(serverEnv.WORKERS ? { workers: Number(serverEnv.WORKERS) } : {}) }),
  },
  {
    name: 'slow-client',
    boundMs: quick ? 3 * 60_000 : 6 * 60_000,
    run: () => runSlowClient(quick
      ? { tricklers: 12, honestCalls: 3, expect: SLOW_CLIENT_PROFILES[slowProfile], log }
      : { tricklers: 50, honestCalls: 10, pacedFrameBytes: 20 * 1024, expect: { ...SLOW_CLIENT_PROFILES[slowProfile], pacedBytesPerSec: SLOW_CLIENT_PROFILES[slowProfile].pacedBytesPerSec === null ? null : 8 * 1024 }, log }),
  },
];

const report: Record<string, unknown> = {
  when: new Date().toISOString(),
  quick,
  slow_profile: slowProfile,
  ...(selected.includes('long') ? { command: `npm run soak -- ${process.argv.slice(2).join(' ')}`, store } : {}),
  machine: { cores: os.availableParallelism(), cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version, loadavg: os.loadavg() },
};
let broken = 0;
process.on('SIGINT', () => {
  killAllServers();
  process.exit(130);
});

for (const s of scenarios) {
  if (!selected.includes(s.name)) continue;
  process.stderr.write(`soak: ${s.name}...\n`);
  const t0 = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<ScenarioResult>((resolve) => {
    timer = setTimeout(() => resolve({ name: s.name, figures: {}, failures: [`did not finish within ${s.boundMs / 1000} s`] }), s.boundMs);
  });
  const r = await Promise.race([s.run().catch((err: Error): ScenarioResult => ({ name: s.name, figures: {}, failures: [`crashed: ${err.stack ?? err.message}`] })), bound]);
  clearTimeout(timer);
  killAllServers();
  const seconds = (performance.now() - t0) / 1000;
  report[s.name] = { ...r, seconds: Math.round(seconds) };
  broken += r.failures.length;
  process.stdout.write(`\n${s.name} (${seconds.toFixed(0)} s): ${r.failures.length === 0 ? 'PASS' : 'FAIL'}\n`);
  for (const [k, v] of Object.entries(r.figures)) process.stdout.write(`  ${k}: ${v}\n`);
  for (const f of r.failures) process.stdout.write(`  FAILED: ${f}\n`);
}

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'results');
fs.mkdirSync(dir, { recursive: true });
// a timed run has its own file, so a short one does not replace the report of the default sizes
const longRun = selected.includes('long');
const file = path.join(dir, longRun ? `soak-${minutes}min-${store}${tag ? `-${tag}` : ''}.json` : minutes !== null ? `soak-${minutes}min${quick ? '-quick' : ''}.json` : quick ? 'soak-quick.json' : 'soak.json');
fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
const longReport = report.long as { series?: { memory?: MemorySample[]; heaps?: { at: number; used: number }[] } } | undefined;
if (longRun && longReport?.series?.memory?.length) {
  const svg = file.replace(/\.json$/, '.svg');
  const extra = Object.keys(serverEnv).length ? ` (${Object.entries(serverEnv).map(([k, v]) => `${k}=${v}`).join(' ')})` : '';
  writeMemorySvg(svg, longReport.series.memory, `${minutes}-minute soak on ${store === 'lmdb' ? 'LMDB' : 'PostgreSQL'}${extra}: RSS, RssAnon, RssFile (MiB)`, longReport.series.heaps);
  process.stdout.write(`plot: ${path.relative(process.cwd(), svg)}\n`);
}
process.stdout.write(`\nreport: ${path.relative(process.cwd(), file)}\n`);
// the scenarios' keep-alive sockets and timers must not keep the runner alive
process.exit(broken === 0 ? 0 : 1);
