// RssAnon less the frame slabs, per window of a long soak's report, and linear fits of it from
// given minutes: how bench/results/soak-30min.md reads a run's memory beyond the soak's own
// rule (the warm-up of V8's heap against a trend).
//
//   node bench/soak/less-slab.mjs bench/results/soak-<N>min-<store>[-<tag>].json [window minutes=5] [fit from minutes=10,20,30,40]
import fs from 'node:fs';
const r = JSON.parse(fs.readFileSync(process.argv[2], 'utf8')).long;
const M = 2 ** 20;
const mem = r.series.memory, heaps = r.series.heaps;
const slabAt = (at) => { let best = null; for (const h of heaps) if (h.at <= at + 6000) best = h; return best?.slab ?? 0; };
const heapAt = (at) => { let best = null; for (const h of heaps) if (h.at <= at + 6000) best = h; return best; };
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN; };
const win = Number(process.argv[3] ?? 5);
const end = mem.at(-1).at;
console.log('window(min) anon slab anon-slab heapTotal heapExternal fds');
for (let t = 0; t < end; t += win * 60000) {
  const w = mem.filter((m) => m.at >= t && m.at < t + win * 60000);
  if (!w.length) continue;
  const hs = w.map((m) => heapAt(m.at)).filter(Boolean);
  console.log(`${(t / 60000).toFixed(0)}-${((t + win * 60000) / 60000).toFixed(0)}`, (med(w.map((m) => m.anon)) / M).toFixed(1), (med(w.map((m) => slabAt(m.at))) / M).toFixed(1), (med(w.map((m) => m.anon - slabAt(m.at))) / M).toFixed(1), (med(hs.map((h) => h.total)) / M).toFixed(1), (med(hs.map((h) => h.external)) / M).toFixed(1), med(w.map((m) => m.fds)));
}
function fit(from) {
  const w = mem.filter((m) => m.at >= from * 60000);
  const xs = w.map((m) => m.at / 3600000), ys = w.map((m) => (m.anon - slabAt(m.at)) / M);
  const n = xs.length, mx = xs.reduce((a, b) => a + b) / n, my = ys.reduce((a, b) => a + b) / n;
  let sxy = 0, sxx = 0; for (let i = 0; i < n; i++) { sxy += (xs[i] - mx) * (ys[i] - my); sxx += (xs[i] - mx) ** 2; }
  const slope = sxy / sxx; const res = ys.map((y, i) => y - (my + slope * (xs[i] - mx)));
  const sd = Math.sqrt(res.reduce((a, b) => a + b * b, 0) / n);
  console.log(`less-slab fit from minute ${from}: slope ${slope.toFixed(1)} MiB/h over ${n} samples, rise ${(slope * (xs.at(-1) - xs[0])).toFixed(1)} MiB, scatter ${sd.toFixed(1)} MiB`);
}
for (const f of (process.argv[4] ?? '10,20,30,40').split(',')) fit(Number(f));
