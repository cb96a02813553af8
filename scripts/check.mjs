// `npm test`'s static checks: the type-check (tsc --noEmit) and the type-aware lint (eslint)
// run at the same time. Each is one busy thread for most of its run (11 s and 16 s here), so
// side by side on two cores they end in the time of the longer one, not of the sum. The
// type-check is incremental: tsc keeps a hash of every file of the program (ours, @types,
// lib) in node_modules/.cache, re-checks what changed and whatever depends on it, and starts
// afresh when the file is gone (npm ci empties node_modules). On an unchanged tree it takes
// about 2 s instead of 6 to 11; the lint has no such sound cache (a rule's answer in one file
// depends on the types of others), so it runs whole. Each one's output is held and printed
// whole, tsc's first, so the two never interleave; the exit status is non-zero when either
// failed.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(import.meta.url);

/** node_modules' own entry of a tool, started with this node: no shell, no npx lookup */
const bin = (pkg, name) => {
  const manifest = require(`${pkg}/package.json`);
  const rel = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin[name];
  return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), rel);
};

const checks = [
  { name: 'tsc --noEmit', args: [bin('typescript', 'tsc'), '--noEmit', '-p', '.', '--incremental', '--tsBuildInfoFile', path.join(ROOT, 'node_modules/.cache/lv-typecheck.tsbuildinfo')] },
  { name: 'eslint .', args: [bin('eslint', 'eslint'), '.'] },
];

const runs = checks.map(
  (c) =>
    new Promise((resolve) => {
      const p = spawn(process.execPath, c.args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
      const out = [];
      p.stdout.on('data', (d) => out.push(d));
      p.stderr.on('data', (d) => out.push(d));
      p.on('error', (err) => resolve({ ...c, code: 1, out: Buffer.from(`${err.message}\n`) }));
      p.on('close', (code, signal) => resolve({ ...c, code: code ?? (signal ? 1 : 0), out: Buffer.concat(out) }));
    }),
);

let failed = 0;
for (const r of await Promise.all(runs)) {
  process.stdout.write(r.out);
  if (r.code !== 0) {
    failed++;
    console.error(`${r.name} failed (exit ${r.code})`);
  }
}
process.exit(failed > 0 ? 1 : 0);
