// Which anonymous mappings of a running process hold its RssAnon (the probe behind
// bench/results/soak-30min.md's slab finding): prints each mapping with anonymous pages as JSON
// (start address, size and Anonymous in kB, permissions, name). Two snapshots of the same
// process, diffed by start address, show which mappings grew.
//
//   node bench/soak/anon-maps.mjs <pid> > before.json   ...   node bench/soak/anon-maps.mjs <pid> > after.json
//   node bench/soak/anon-maps.mjs --diff before.json after.json
//
// The frame slabs (docs/capacity.md "Upload storage") are one 20 MiB + 4 KiB mapping per API
// worker; adjacent ones merge into a single mapping of a multiple of that size.
import fs from 'node:fs';

function snapshot(pid) {
  const out = [];
  let cur = null;
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (m) {
      cur = { start: m[1], sizeKb: (parseInt(m[2], 16) - parseInt(m[1], 16)) / 1024, perms: m[3], name: m[4] };
      out.push(cur);
      continue;
    }
    const k = /^Anonymous:\s+(\d+) kB/.exec(line);
    if (k && cur) cur.anonKb = Number(k[1]);
  }
  return out.filter((x) => x.anonKb > 0);
}

if (process.argv[2] === '--diff') {
  const [a, b] = process.argv.slice(3).map((f) => JSON.parse(fs.readFileSync(f, 'utf8')));
  const before = new Map(a.map((m) => [m.start, m]));
  const rows = b.map((m) => ({ ...m, grewKb: m.anonKb - (before.get(m.start)?.anonKb ?? 0) }));
  for (const m of a) if (!b.some((x) => x.start === m.start)) rows.push({ ...m, anonKb: 0, grewKb: -m.anonKb, name: `${m.name} (gone)` });
  rows.sort((x, y) => y.grewKb - x.grewKb);
  const sum = (xs) => xs.reduce((n, m) => n + m.anonKb, 0);
  console.log(`anonymous kB: ${sum(a)} -> ${sum(b)}; the mappings that grew most:`);
  for (const r of rows.slice(0, 10)) console.log(`  ${r.start} ${r.sizeKb} kB mapped, ${r.anonKb} kB anonymous (${r.grewKb >= 0 ? '+' : ''}${r.grewKb}) ${r.name}`);
} else {
  process.stdout.write(`${JSON.stringify(snapshot(process.argv[2]))}\n`);
}
