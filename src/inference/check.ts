// `npm run cli -- models check <dir>`: validates a model set's manifest and runs every
// graph once on the default (WASM) runtime, so an operator learns of a bad deployment
// before the service does.
import { MODULE_IDS } from '../contract/index.ts';
import { loadManifest, MAX_BATCH, type Manifest } from './manifest.ts';
import { ModuleRunner } from './runner.ts';
import { createRuntime } from './runtime.ts';
import { seededCrop } from './seeded-crop.ts';

const fmt = (x: number) => x.toFixed(4);

export async function checkModelSet(dir: string): Promise<{ ok: boolean; report: string }> {
  const lines: string[] = [];
  let manifest: Manifest;
  try {
    manifest = loadManifest(dir);
  } catch (e) {
    return { ok: false, report: (e as Error).message };
  }
  lines.push(`manifest.json: ok (model_set ${manifest.model_set}, trained ${manifest.trained})`);
  if (!manifest.trained) lines.push('warning: trained is false; this set\'s verdicts carry no meaning');
  let ok = true;
  const runtime = await createRuntime('wasm', 1);
  for (const id of MODULE_IDS) {
    const mod = manifest.modules[id];
    if (!mod) continue;
    let runner: ModuleRunner | null = null;
    try {
      runner = await ModuleRunner.load(runtime, manifest, id);
      lines.push(`${id}: ${mod.graphs.length} graph(s) loaded: ${mod.graphs.map((g) => `${g.file} (${g.role})`).join(', ')}`);
      if (id === 'rgb_liveness') {
        const crops = Array.from({ length: MAX_BATCH }, (_, i) => seededCrop(i + 1));
        const one = await runner.runFrames(crops.slice(0, 1));
        const four = await runner.runFrames(crops);
        if (Math.abs(one.probability[0] - four.probability[0]) > 1e-4) {
          throw new Error(`frame score differs between batch 1 and batch ${MAX_BATCH} (${one.probability[0]} vs ${four.probability[0]})`);
        }
        // the graph checks at load make this unreachable; it stays as the last word, so
        // a score the service could not decide on never reads "result: ok"
        if (!four.probability.every((p) => Number.isFinite(p) && p >= 0 && p <= 1)) {
          throw new Error(`frame ensemble gave live probabilities ${four.probability.join(' ')}`);
        }
        lines.push(`  frame ensemble: live probabilities ${four.probability.map(fmt).join(' ')}; features ${four.featureSize}`);
        if (manifest.modules.rgb_liveness?.modes.rgb_sequence?.decision_policy === 'temporal_head_v1') {
          const t = await runner.runTemporal(four.features!, MAX_BATCH);
          lines.push(`  temporal head: logit ${fmt(t.logit)} over ${MAX_BATCH} frames`);
        }
      } else {
        const out = await runner.runColor([1, 2, 3, 4].map(seededCrop));
        lines.push(`  colour branches: difference logit ${fmt(out.difference.logit)}, appearance logit ${fmt(out.appearance.logit)}`);
      }
    } catch (e) {
      ok = false;
      lines.push(`${id}: FAILED: ${(e as Error).message}`);
    } finally {
      await runner?.release();
    }
  }
  lines.push(ok ? 'result: ok' : 'result: FAILED');
  return { ok, report: lines.join('\n') };
}
