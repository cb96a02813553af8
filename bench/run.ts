// npm run bench [-- --quick]: every benchmark of the project, a JSON and a markdown report
// under bench/results/. Figures only: targets are judged by people reading the report.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchEndToEnd } from './e2e.ts';
import { benchInference } from './inference.ts';
import { benchMetering } from './metering.ts';
import { benchMultipart } from './multipart.ts';

const quick = process.argv.includes('--quick');
const only = process.argv.find((a) => a.startsWith('--only='))?.slice(7).split(',');
const want = (name: string) => !only || only.includes(name);
const results: Record<string, unknown> = {
  when: new Date().toISOString(),
  quick,
  machine: { cores: os.availableParallelism(), cpu: os.cpus()[0]?.model ?? 'unknown', node: process.version },
};

async function step<T>(name: string, fn: () => Promise<T>): Promise<T | undefined> {
  if (!want(name)) return undefined;
  process.stderr.write(`bench: ${name}...\n`);
  const t0 = performance.now();
  try {
    const r = await fn();
    results[name] = r;
    process.stderr.write(`bench: ${name} done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    return r;
  } catch (err) {
    results[name] = { error: (err as Error).message };
    process.stderr.write(`bench: ${name} failed: ${(err as Error).stack}\n`);
    return undefined;
  }
}

const multipart = await step('multipart', () => benchMultipart({ ms: quick ? 500 : 2000 }));
// bench/ingest.ts is optional while it is being written
const ingestMod = await import('./ingest' + '.ts').catch(() => undefined);
const ingest = ingestMod && 'benchIngest' in ingestMod ? await step('ingest', () => (ingestMod as { benchIngest(o: { quick: boolean }): Promise<unknown> }).benchIngest({ quick })) : undefined;
const metering = await step('metering', () => benchMetering({ quick }));
const inference = (await step('inference', () => benchInference({ quick }))) as
  | { engine: { modes: Record<string, { captures_per_s: number }> }; per_frame: { provider: string; threads: number; batch: number; ms_per_frame: number; frames_per_s: number }[] }
  | undefined;
const e2e = await step('e2e', () => benchEndToEnd({ quick }));

// service captures/s over bare in-process engine captures/s of the same mode
const bareFor: Record<string, string> = {
  'rgb_single png': 'rgb_single',
  'rgb_single rgb8': 'rgb_single',
  'rgb_sequence 20 png': 'rgb_sequence_20',
  'color 4 png': 'color_4',
  'batch 32 rgb_single png': 'rgb_single',
};
const ratios: { scenario: string; service_captures_per_s: number; bare_captures_per_s: number; ratio: number }[] = [];
if (e2e && inference?.engine) {
  for (const s of e2e.scenarios) {
    const bare = inference.engine.modes[bareFor[s.name]!]?.captures_per_s;
    if (bare) ratios.push({ scenario: s.name, service_captures_per_s: s.captures_per_s, bare_captures_per_s: bare, ratio: s.captures_per_s / bare });
  }
  results.ratios = ratios;
}
if (metering && e2e) {
  const single = e2e.scenarios.find((s) => s.name === 'rgb_single png');
  if (single) results.metering_share_of_p50 = metering.sequential_ms_per_call / single.p50_ms;
}

const here = path.dirname(fileURLToPath(import.meta.url));
const stamp = quick ? 'quick' : 'full';
fs.writeFileSync(path.join(here, 'results', `${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);

const f = (n: number | undefined, d = 1) => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(d));
const md: string[] = [`# Benchmark report (${stamp})`, '', `${results.when}, ${(results.machine as { cores: number }).cores} cores, ${(results.machine as { cpu: string }).cpu}, Node ${process.version}`, ''];
if (inference?.per_frame) {
  md.push('## Bare inference (raw_v1 RGB frame CNN, preprocessing included)', '', '| backend | threads | batch | ms/frame | frames/s |', '|---|---|---|---|---|');
  for (const p of inference.per_frame) md.push(`| ${p.provider} | ${p.threads} | ${p.batch} | ${f(p.ms_per_frame, 2)} | ${f(p.frames_per_s, 0)} |`);
  md.push('', '| engine mode | captures/s |', '|---|---|');
  for (const [k, v] of Object.entries(inference.engine.modes)) md.push(`| ${k} | ${f(v.captures_per_s)} |`);
  md.push('');
}
if (e2e) {
  md.push(`## End-to-end verify over HTTP (${e2e.workers} API workers, ${e2e.in_flight} in flight, ${e2e.inference_threads} inference threads)`, '', '| scenario | captures/s | requests/s | p50 ms | p99 ms | non-200 |', '|---|---|---|---|---|---|');
  for (const s of e2e.scenarios) md.push(`| ${s.name} | ${f(s.captures_per_s)} | ${f(s.requests_per_s)} | ${f(s.p50_ms)} | ${f(s.p99_ms)} | ${s.non_200} |`);
  md.push('');
}
if (ratios.length) {
  md.push('## Service captures/s / bare inference captures/s', '', '| scenario | service | bare | ratio |', '|---|---|---|---|');
  for (const r of ratios) md.push(`| ${r.scenario} | ${f(r.service_captures_per_s)} | ${f(r.bare_captures_per_s)} | ${f(r.ratio, 2)} |`);
  md.push('');
}
if (metering) {
  md.push('## Metering + idempotency', '', `${f(metering.sequential_ms_per_call, 2)} ms per call sequentially (2 durable LMDB transactions), ${f(metering.concurrent_calls_per_s, 0)} calls/s with ${metering.concurrent_in_flight} in flight.`);
  if (results.metering_share_of_p50 !== undefined) md.push(`Share of the rgb_single p50 request time: ${f((results.metering_share_of_p50 as number) * 100)} %.`);
  md.push('');
}
if (multipart) {
  md.push('## Multipart parse + hash', '', '```', JSON.stringify(multipart, null, 2), '```', '');
}
if (ingest) md.push('## Ingest (parse + hash + decode)', '', '```', JSON.stringify(ingest, null, 2), '```', '');
fs.writeFileSync(path.join(here, 'results', `${stamp}.md`), `${md.join('\n')}\n`);
process.stdout.write(`${md.join('\n')}\n`);
process.exit(0);
