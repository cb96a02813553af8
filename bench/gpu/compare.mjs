// The largest |difference| between two probe score files, over every number whose key
// names a score or a logit, with the path of the worst one.
import { readFileSync } from 'node:fs';
const [a, b] = process.argv.slice(2).map((f) => JSON.parse(readFileSync(f, 'utf8')));
let max = 0, n = 0, where = '';
const walk = (x, y, path) => {
  if (typeof x === 'number' && typeof y === 'number') {
    if (!/score|logit/.test(path.join('.'))) return;
    n++; const d = Math.abs(x - y); if (d > max) { max = d; where = path.join('.'); }
  } else if (x && typeof x === 'object') for (const key of Object.keys(x)) walk(x[key], y?.[key], [...path, key]);
};
walk(a, b, []);
console.log(JSON.stringify({ compared: n, max_abs_diff: max, at: where }));
