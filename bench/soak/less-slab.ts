// RssAnon less the frame slabs, per window of a long soak's report, and linear fits of it from
// given minutes: how bench/results/soak-30min.md reads a run's memory beyond the soak's own
// rule (the warm-up of V8's heap against a trend). The slabs, the fit and its scatter are the
// soak's own (long.ts slabsAt, plateauOf), so a figure here is what its verdict would read.
//
//   node --import tsx bench/soak/less-slab.ts bench/results/soak-<N>min-<store>[-<tag>].json [window minutes=5] [fit from minutes=10,20,30,40]
import fs from 'node:fs';
import { median, plateauOf, slabsAt } from './long.ts';

interface Heap { at: number; total?: number; external?: number; slab?: number }
interface Memory { at: number; anon: number; fds: number }

const report = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')).long as { series: { memory: Memory[]; heaps: Heap[] } };
const { memory, heaps } = report.series;
const M = 2 ** 20;
const slabAt = slabsAt(heaps);
/** the latest heaps read at or before `at` */
const heapAt = (at: number) => heaps.filter((h) => h.at <= at).at(-1);
const mib = (xs: number[]) => (median(xs) / M).toFixed(1);
const win = Number(process.argv[3] ?? 5) * 60_000;
const end = memory.at(-1)!.at;
console.log('window(min) anon slab anon-slab heapTotal heapExternal fds');
for (let t = 0; t < end; t += win) {
  const w = memory.filter((m) => m.at >= t && m.at < t + win);
  if (!w.length) continue;
  const hs = w.map((m) => heapAt(m.at)).filter((h) => h !== undefined);
  console.log(`${t / 60_000}-${(t + win) / 60_000}`, mib(w.map((m) => m.anon)), mib(w.map((m) => slabAt(m.at))), mib(w.map((m) => m.anon - slabAt(m.at))), mib(hs.map((h) => h.total ?? 0)), mib(hs.map((h) => h.external ?? 0)), median(w.map((m) => m.fds)));
}
for (const from of (process.argv[4] ?? '10,20,30,40').split(',').map(Number)) {
  const w = memory.filter((m) => m.at >= from * 60_000);
  const p = plateauOf(w.map((m) => m.at), w.map((m) => m.anon - slabAt(m.at)));
  console.log(`less-slab fit from minute ${from}: slope ${(p.slopePerHour / M).toFixed(1)} MiB/h over ${p.samples} samples, rise ${(p.fittedRise / M).toFixed(1)} MiB, scatter ${(p.scatter / M).toFixed(1)} MiB`);
}
