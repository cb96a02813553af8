import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { buildModelSets, MODELS_DIR } from '../../models/builder/build.ts';

t.test('the builder reproduces every committed model-set file byte for byte', async (t) => {
  const built = buildModelSets();
  const names = Object.keys(built);
  t.ok(names.includes('raw_v1/manifest.json') && names.includes('bgr80_ensemble_v1/manifest.json'));
  for (const [rel, bytes] of Object.entries(built)) {
    const committed = readFileSync(join(MODELS_DIR, rel));
    t.ok(Buffer.from(bytes).equals(committed), `${rel} matches (${bytes.length} bytes)`);
    if (rel.endsWith('.onnx')) t.ok(bytes.length < 1024 * 1024, `${rel} stays under 1 MiB`);
  }
  // Nothing in a shipped set comes from anywhere but the builder.
  for (const set of ['raw_v1', 'bgr80_ensemble_v1']) {
    for (const file of readdirSync(join(MODELS_DIR, set))) {
      t.ok(names.includes(`${set}/${file}`), `${set}/${file} is produced by the builder`);
    }
  }
});

t.test('a second build gives the same bytes (no clock, no unseeded randomness)', async (t) => {
  const a = buildModelSets();
  const b = buildModelSets();
  for (const rel of Object.keys(a)) t.ok(Buffer.from(a[rel]).equals(Buffer.from(b[rel])), rel);
});
