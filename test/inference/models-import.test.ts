import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { GraphBuilder } from '../../models/builder/graph.ts';
import { pool } from '../../models/builder/layers.ts';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken, runCli, tempDir } from '../helpers/server.ts';
import { waitFor } from '../helpers/wait.ts';
import { brightnessGraph } from './test-graphs.ts';

// Issue 25, "a trained model in minutes": an operator's own graph becomes a served model set
// with one command. The graphs are built here, so what the import must read is known.

/** A float32 NHWC input [N, 32, 32, 3] and 3 class logits, live class 1: brighter is more
 * live. */
function nhwcLogitsGraph(): Uint8Array {
  const g = new GraphBuilder('nhwc_logits');
  const x = g.input('pixels', ['N', 32, 32, 3]);
  const nchw = g.node('Transpose', [x], { perm: [0, 3, 1, 2] });
  const m3 = pool(g, nchw);
  const k = 8 / 3;
  const w = new Float32Array([-k, -k, -k, k, k, k, 0, 0, 0]);
  const b = new Float32Array([4, -4, 0]);
  g.node('Gemm', [m3, g.weight('w', [3, 3], w), g.weight('b', [3], b)], { transB: 1 }, 'class_logits');
  g.output('class_logits', ['N', 3]);
  return g.encode('test graph: NHWC class logits');
}

const FLAGS = ['--crop-fraction', '0.9', '--resize', 'bilinear', '--channel-order', 'RGB', '--scale', '0.00392156862745098', '--mean', '0,0,0', '--std', '1,1,1'];

const root = tempDir('import-');
const modelsDir = join(root, 'models');
mkdirSync(modelsDir);
const dataDir = join(root, 'data');
const env = { MODELS_DIR: modelsDir };
const nhwc = join(root, 'kiosk-net.onnx');
writeFileSync(nhwc, nhwcLogitsGraph());

t.test('what the graph cannot tell is asked for by name; nothing is written meanwhile', async (t) => {
  const r = await runCli(dataDir, ['models', 'import', nhwc], '', env);
  t.equal(r.code, 2);
  t.match(r.stderr, /read from the graph: input "pixels" float32 NHWC, size 32, batch dynamic; output "class_logits" with 3 value\(s\) per item \(rows do not sum to 1: logits\)/);
  for (const flag of ['--crop-fraction', '--resize', '--channel-order', '--scale', '--mean', '--std', '--live-index']) t.match(r.stderr, flag);
  t.notMatch(r.stderr, '--size', 'the size is read from the graph');
  t.notMatch(r.stderr, '--output-kind', 'a multi-class output says what it is');
  t.notOk(existsSync(join(modelsDir, 'kiosk-net_v1')), 'no half-made set');
  const bad = await runCli(dataDir, ['models', 'import', nhwc, ...FLAGS, '--live-index', '3'], '', env);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /--live-index: "3" is not allowed/);
});

t.test('an NHWC logits graph becomes a checked, trained model set that a server serves', async (t) => {
  const r = await runCli(dataDir, ['models', 'import', nhwc, ...FLAGS, '--live-index', '1', '--threshold', '0.6'], '', env);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json, { model_set: 'kiosk-net_v1', check: 'ok', next: [/models calibrate kiosk-net_v1/, /module disable color_liveness/, /models activate kiosk-net_v1/] });
  const manifest = JSON.parse(readFileSync(join(modelsDir, 'kiosk-net_v1', 'manifest.json'), 'utf8'));
  t.match(manifest, {
    model_set: 'kiosk-net_v1',
    trained: true,
    modules: {
      rgb_liveness: {
        graphs: [{ role: 'frame', file: 'frame.onnx', input: 'pixels', output: 'class_logits', output_kind: 'logits', live_index: 1, layout: 'NHWC', dtype: 'float32', batch: 'dynamic', size: 32, crop_fraction: 0.9, resize: 'bilinear', channel_order: 'RGB', mean: [0, 0, 0], std: [1, 1, 1] }],
        modes: { rgb_single: { threshold: 0.6 }, rgb_sequence: { decision_policy: 'window_mean_v1', threshold: 0.6 } },
      },
    },
  });
  t.match(r.stderr, /result: ok/, 'the graph checks ran');
  t.equal((await runCli(dataDir, ['models', 'import', nhwc, ...FLAGS, '--live-index', '1'], '', env)).code, 4, 'an existing set is not replaced without --force (conflict)');

  // a server on the untrained raw_v1, which REQUIRE_TRAINED_MODELS keeps unready, switched to
  // the imported set from the CLI
  cpSync(join(import.meta.dirname, '../../models/raw_v1'), join(modelsDir, 'raw_v1'), { recursive: true });
  // the service's API in process with its real engine, which hears the CLI's activation request
  // as a server's main thread does (test/helpers/api.ts; issue 43: this was a started server)
  const server = await startApi({ engine: 'real', env: { ...env, MODEL_SET: 'raw_v1', INFERENCE_BACKEND: 'wasm', WARMUP_RUNS: '1', REQUIRE_TRAINED_MODELS: '1' } });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:10:day']);
  const act = await server.cli(['models', 'activate', 'kiosk-net_v1', '--wait', '120']);
  t.equal(act.code, 0, act.stderr);
  t.match(act.json, { model_set: 'kiosk-net_v1', outcome: 'active' }, 'activated from the CLI');
  await waitFor(async () => (await (await fetch(`${server.baseUrl}/health/ready`)).json()).modules?.rgb_liveness?.ready, { what: 'the imported set ready', timeoutMs: 60_000 });
  const ok = await postVerify(server.baseUrl, token, 'rgb_liveness', request([single({ id: 'imported' })]));
  t.equal(ok.status, 200, ok.text);
  t.match(ok.json.results[0], { model_set: 'kiosk-net_v1', threshold: 0.6, status: 'ok' });
});

t.test('a softmax output is recognised; a one-value output needs --output-kind', async (t) => {
  const softmax = join(root, 'soft.onnx');
  writeFileSync(softmax, brightnessGraph('softmax', 48, 8, 0.5));
  const r = await runCli(dataDir, ['models', 'import', softmax, '--name', 'soft_v1', ...FLAGS, '--live-index', '1'], '', env);
  t.equal(r.code, 0, r.stderr);
  t.match(r.json.manifest.modules.rgb_liveness.graphs[0], { layout: 'NCHW', output_kind: 'softmax', size: 48, live_index: 1 });
  const wrong = await runCli(dataDir, ['models', 'import', softmax, '--name', 'soft2_v1', ...FLAGS, '--live-index', '1', '--output-kind', 'logits'], '', env);
  t.equal(wrong.code, 2);
  t.match(wrong.stderr, /rows sum to 1 \(softmax\)/);

  const logit = join(root, 'one.onnx');
  writeFileSync(logit, brightnessGraph('logit', 32, 8, 0.5));
  const missing = await runCli(dataDir, ['models', 'import', logit, ...FLAGS], '', env);
  t.equal(missing.code, 2);
  t.match(missing.stderr, /--output-kind \(The single output value is a logit or a probability\)/);
  const done = await runCli(dataDir, ['models', 'import', logit, ...FLAGS, '--output-kind', 'logit', '--untrained'], '', env);
  t.equal(done.code, 0, done.stderr);
  t.match(done.json.manifest, { trained: false, modules: { rgb_liveness: { graphs: [{ output_kind: 'logit' }] } } });
  t.notOk('live_index' in done.json.manifest.modules.rgb_liveness.graphs[0]);

  const notOnnx = join(root, 'junk.onnx');
  writeFileSync(notOnnx, 'not a graph');
  const junk = await runCli(dataDir, ['models', 'import', notOnnx, ...FLAGS], '', env);
  t.equal(junk.code, 2);
  t.match(junk.stderr, /not an ONNX graph/);
});

// A graph is an outside file: its tensor names reach the operator's terminal in what the import
// prints on stderr, and a terminal runs the control sequences it is sent (clear the screen,
// rewrite the line that says the checks passed, OSC 52 to the clipboard). They are printed
// escaped (src/cli/printable.ts), in the import's report and in its refusals alike.
t.test('control sequences in a graph\'s tensor names are printed escaped, never sent to the terminal', async (t) => {
  const IN = 'px\u001b[2J\u001b[H\u001b]52;c;cm0gLXJmIH4K\u0007';
  const OUT = 'score\r\u001b[32mmodels import: all checks passed\u202e';
  const one = new GraphBuilder('hostile_names');
  one.node('Gemm', [pool(one, one.input(IN, ['N', 3, 32, 32])), one.weight('w', [1, 3], new Float32Array([1, 1, 1])), one.weight('b', [1], new Float32Array([0]))], { transB: 1 }, OUT);
  one.output(OUT, ['N', 1]);
  const file = join(root, 'hostile.onnx');
  writeFileSync(file, one.encode('test graph: hostile tensor names'));
  const r = await runCli(dataDir, ['models', 'import', file], '', env);
  t.equal(r.code, 2, 'asks for what the graph cannot tell');
  t.match(r.stderr, 'read from the graph: input "px\\u001b[2J\\u001b[H\\u001b]52;c;cm0gLXJmIH4K\\u0007"');
  t.match(r.stderr, 'output "score\\u000d\\u001b[32mmodels import: all checks passed\\u202e"');

  const two = new GraphBuilder('hostile_two');
  const m = pool(two, two.input(IN, ['N', 3, 32, 32]));
  two.node('Identity', [m], {}, OUT);
  two.node('Identity', [m], {}, 'second\u001b[2J');
  two.output(OUT, ['N', 3]);
  two.output('second\u001b[2J', ['N', 3]);
  const file2 = join(root, 'hostile-two.onnx');
  writeFileSync(file2, two.encode('test graph: two outputs, hostile names'));
  const refused = await runCli(dataDir, ['models', 'import', file2, ...FLAGS], '', env);
  t.not(refused.code, 0, 'two outputs are refused');
  t.match(refused.stderr, /^error: .*second\\u001b\[2J/m, 'the refusal names the outputs, escaped');
  for (const out of [r.stderr, refused.stderr]) t.notOk(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e]/.test(out), 'no control character reaches stderr');
});

// review3b: the JSON on stdout (the import's manifest, with the graph's tensor names) carried C1
// controls and bidi overrides raw: JSON.stringify escapes only C0. Escaped now, as the same JSON.
t.test('C1 controls and bidi overrides in tensor names are escaped on stdout too, the JSON unchanged', async (t) => {
  const IN = 'px\u009b2J\u202eevil';
  const OUT = 'score\u009b31m\u202e';
  const g = new GraphBuilder('hostile_c1');
  // the channels' mean: a probability in [0, 1], which the import's check runs
  g.node('Gemm', [pool(g, g.input(IN, ['N', 3, 32, 32])), g.weight('w', [1, 3], new Float32Array([1 / 3, 1 / 3, 1 / 3])), g.weight('b', [1], new Float32Array([0]))], { transB: 1 }, OUT);
  g.output(OUT, ['N', 1]);
  const file = join(root, 'hostile-c1.onnx');
  writeFileSync(file, g.encode('test graph: C1 and bidi in tensor names'));
  const r = await runCli(dataDir, ['models', 'import', file, ...FLAGS, '--output-kind', 'probability', '--live-index', '0', '--threshold', '0.5', '--untrained'], '', env);
  t.equal(r.code, 0, r.stderr);
  t.same([...r.stdout.matchAll(/[\u0080-\u009f\u202a-\u202e]/g)].map((m) => m[0].codePointAt(0)!.toString(16)), [], 'no raw C1 control or bidi override on stdout');
  t.match(r.stdout, '\\u009b', 'escaped');
  t.ok(JSON.stringify(r.json).includes(JSON.stringify(IN).slice(1, -1)), 'the JSON still holds the names as they are');
});
