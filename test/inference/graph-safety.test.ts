import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { graphFileProblem } from '../../src/inference/graph-safety.ts';
import { checkModelSet } from '../../src/inference/check.ts';
import { tempDir } from '../helpers/server.ts';
import { batchDependentGraph, endlessGraph, externalDataGraph, nestedLoopGraph, writeSet } from './hostile-graphs.ts';
import { brightnessGraph } from './test-graphs.ts';

// The file-level checks every graph passes before a runtime sees it (issue 40, findings 1
// and 6), and the batch check the server now runs as `models check` did (the server's own
// refusals: hostile-models.test.ts).

t.test('the shipped graphs and the test graphs are accepted', async (t) => {
  const models = join(import.meta.dirname, '../../models');
  for (const set of ['raw_v1', 'bgr80_ensemble_v1']) {
    for (const f of readdirSync(join(models, set)).filter((f) => f.endsWith('.onnx'))) {
      t.equal(graphFileProblem(readFileSync(join(models, set, f))), null, `${set}/${f}`);
    }
  }
  t.equal(graphFileProblem(brightnessGraph('softmax', 32, 8, 0.5)), null);
});

t.test('external data, a Loop (also inside an If branch) and unreadable files are refused', async (t) => {
  t.match(graphFileProblem(externalDataGraph(32, 'package.json')), /^tensor "b" \(an initializer of the main graph\) is stored as external data in "package\.json"/);
  t.match(graphFileProblem(externalDataGraph(32, 'data/keys/signing.json')), /in "data\/keys\/signing\.json"/);
  t.match(graphFileProblem(endlessGraph(32)), /^node "v_end" \(the main graph\) is a Loop/);
  t.match(graphFileProblem(nestedLoopGraph(32)), /^node "v_end" \(a subgraph of node "v_end" \(If\)\) is a Loop/);
  t.match(graphFileProblem(new TextEncoder().encode('not a graph')), /^is not an ONNX model this service can read/);
  t.match(graphFileProblem(new Uint8Array(0)), /^is not an ONNX model \(no graph in it\)/);
});

t.test('a dynamic-batch graph that scores a frame by its neighbours fails the load check', async (t) => {
  const root = tempDir('batch-');
  const dir = writeSet(root, 'batchy_v1', batchDependentGraph(32));
  const r = await checkModelSet(dir);
  t.equal(r.ok, false);
  t.match(r.report, /rgb_liveness: FAILED: modules\.rgb_liveness\.graphs\[0\]: frame\.onnx output "score" differs between batch 1 and batch 4 on check crop 0/);
});
