// What tracing costs in memory and CPU (docs/observability.md, "Traces"): the compiled service
// with WORKERS=2, tracing off, on at 10 % and at 100 % (an OTLP/HTTP sink in this process
// answering 200), each after start and after N sequential verify calls: the process's RSS
// (RssAnon, RssFile), the API workers' heap used, and the process's CPU time per call (user +
// system, the exports included: read once the RSS settled). CPU time per call is steadier
// than calls/s on a shared machine, but not immune to it. Rounds interleaved; read the medians.
//
//   npm run build && node --import tsx bench/traces-rss.ts [--rounds 2] [--calls 50]
//
// Writes bench/results/traces-rss.{json,md}.
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { postVerify, request, single } from './harness/captures.ts';
import { makeToken, ROOT, startServer } from './harness/server.ts';

// the environment `npm start` runs with (plain JavaScript, shared with the .mjs benches)
const { PRODUCTION_ENV } = (await import('./production-env.mjs' as string)) as { PRODUCTION_ENV: Record<string, string> };
const opt = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = opt('rounds', 2);
const CALLS = opt('calls', 200);

let exported = 0;
const sink = createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    exported++;
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
const endpoint = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;

const MiB = (kib: number) => Math.round(kib / 102.4) / 10;
function status(pid: number) {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(s)?.[1] ?? NaN);
  return { rss: MiB(kib('VmRSS')), anon: MiB(kib('RssAnon')), file: MiB(kib('RssFile')) };
}
/** user + system CPU of the process, ms (clock ticks of 10 ms) */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
async function settled(pid: number) {
  let last = status(pid);
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = status(pid);
    if (Math.abs(now.rss - last.rss) < 1) return now;
    last = now;
  }
  return last;
}
async function workerHeap(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const used = [...text.matchAll(/^nodejs_heap_size_used_bytes\{[^}]*thread="api-\d+"[^}]*\} (\S+)$/gm)].map((m) => Number(m[1]));
  return Math.round(used.reduce((a, b) => a + b, 0) / used.length / 104857.6) / 10;
}

const CONFIGS: Record<string, Record<string, string>> = {
  off: {},
  'on (10 %)': { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1', OTEL_BSP_SCHEDULE_DELAY: '200' },
  'on (100 %)': { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_SCHEDULE_DELAY: '200' },
};
const rows: { config: string; round: number; idle: ReturnType<typeof status>; after: ReturnType<typeof status>; heapMiB: number; cpuMsPerCall: number }[] = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const config of round % 2 ? Object.keys(CONFIGS).reverse() : Object.keys(CONFIGS)) {
    const extra = CONFIGS[config]!;
    const server = await startServer({ ready: true, env: { ...PRODUCTION_ENV, WORKERS: '2', ...extra } });
    const pid = server.proc.pid!;
    const idle = await settled(pid);
    const { token } = await makeToken(server, ['rgb_liveness:100000:day']);
    // one call first: a traced worker loads the SDK at its first call, not counted
    await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'rss-first' })]));
    await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'rss-second' })]));
    const cpuBefore = cpuMs(pid);
    for (let i = 0; i < CALLS; i++) {
      const r = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: `rss-${i}` })]));
      if (r.status !== 200) throw new Error(`verify answered ${r.status}: ${r.text}`);
    }
    const after = await settled(pid);
    const cpuMsPerCall = Math.round(((cpuMs(pid) - cpuBefore) / CALLS) * 100) / 100;
    const heapMiB = await workerHeap(server.baseUrl);
    await server.stop();
    rows.push({ config, round, idle, after, heapMiB, cpuMsPerCall });
    console.log(config, round, JSON.stringify({ idle, after, heapMiB, cpuMsPerCall }));
  }
}
sink.close();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const lines = [
  '# Memory and CPU of tracing (compiled service, WORKERS=2)',
  '',
  `Command: \`npm run build && node --import tsx bench/traces-rss.ts ${process.argv.slice(2).join(' ')}\`. \`npm start\`'s environment, ${ROUNDS} round(s) interleaved, ${CALLS} single-capture verify calls after start; OTLP sink in the bench process (${exported} exports received). The 2-core machine is shared with other engineers' runs: RSS is not CPU-bound, but read medians. MiB.`,
  '',
  '| tracing | RSS idle | RssAnon idle | RSS after calls | RssAnon after | RssFile after | API worker heap used after | CPU ms per call |',
  '|---|---|---|---|---|---|---|---|',
  ...Object.keys(CONFIGS).map((c) => {
    const r = rows.filter((x) => x.config === c);
    return `| ${c} | ${median(r.map((x) => x.idle.rss))} | ${median(r.map((x) => x.idle.anon))} | ${median(r.map((x) => x.after.rss))} | ${median(r.map((x) => x.after.anon))} | ${median(r.map((x) => x.after.file))} | ${median(r.map((x) => x.heapMiB))} | ${median(r.map((x) => x.cpuMsPerCall))} |`;
  }),
  '',
];
writeFileSync(join(ROOT, 'bench/results/traces-rss.json'), JSON.stringify({ rounds: ROUNDS, calls: CALLS, exported, rows }, null, 2));
writeFileSync(join(ROOT, 'bench/results/traces-rss.md'), lines.join('\n'));
console.log(lines.join('\n'));
