// `npm run cli -- models import <file.onnx>`: an operator's own trained frame graph becomes a
// model set in MODELS_DIR. Operator tool (runs in the CLI process, never in the server).
//
// What the graph itself declares is read from it: the input's name, element type and shape
// (layout, square size, fixed or dynamic batch) and the output's name and width. What only
// the graph's training knows (which part of the crop it saw, colour order, normalisation,
// what its output means) cannot be read and is never guessed: a wrong guess would serve
// plausible-looking verdicts that mean nothing. Those come from flags, or from questions when
// a person is at the terminal; whatever is missing is named in one error.
import { copyFileSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { graphFileProblem } from './graph-safety.ts';
import { MANIFEST_FORMAT } from './manifest.ts';
import { createRuntime, type Session } from './runtime.ts';

/** Not HTTP errors: `models import` is an operator tool; the CLI prints the message and exits
 * with EXIT.usage (ImportExistsError: EXIT.conflict). */
export class ImportError extends Error {}
/** the set's folder exists already (a conflict, not a usage mistake) */
export class ImportExistsError extends ImportError {}

/** What the graph declares about itself. */
export interface GraphFacts {
  input: string;
  dtype: 'float32' | 'uint8';
  layout: 'NCHW' | 'NHWC';
  /** the square input size, or null when the graph leaves it symbolic */
  size: number | null;
  batch: 'dynamic' | 1;
  output: string;
  /** values per item of the output (1: one score; 2 or more: classes) */
  width: number;
  /** for a multi-class output: every row summed to 1 on the probe inputs (a softmax) */
  rowsSumToOne: boolean;
}

/** Answers for what the graph cannot say; strings as typed on a command line. */
export interface ImportAnswers {
  name?: string;
  crop_fraction?: string;
  size?: string;
  resize?: string;
  channel_order?: string;
  scale?: string;
  mean?: string;
  std?: string;
  output_kind?: string;
  live_index?: string;
  threshold?: string;
  untrained?: boolean;
}

export interface Question {
  key: keyof ImportAnswers & string;
  flag: string;
  prompt: string;
}

const fixed = (d: number | string | undefined): number | null => (typeof d === 'number' && d > 0 ? d : null);

export async function readGraphFacts(bytes: Uint8Array): Promise<GraphFacts> {
  // before any runtime sees the bytes: no external data (it would read a file named by the
  // graph), no Loop (it may never end): graph-safety.ts
  const unsafe = graphFileProblem(bytes);
  if (unsafe) throw new ImportError(`the file is not an ONNX graph this service accepts: it ${unsafe}`);
  const runtime = await createRuntime('wasm', 1);
  let session: Session;
  try {
    session = await runtime.createSession(bytes);
  } catch (e) {
    throw new ImportError(`the file is not an ONNX graph this runtime can load: ${(e as Error).message}`);
  }
  try {
    if (session.inputNames.length !== 1) throw new ImportError(`a frame graph takes one image input; this one has ${session.inputNames.length} (${session.inputNames.join(', ')})`);
    const input = session.inputNames[0]!;
    const meta = session.input(input);
    if (!meta) throw new ImportError(`the runtime does not report the shape of input "${input}"`);
    if (meta.type !== 'float32' && meta.type !== 'uint8') throw new ImportError(`input "${input}" is ${meta.type}; float32 or uint8 is needed`);
    const shape = meta.shape;
    if (shape.length !== 4) throw new ImportError(`input "${input}" has ${shape.length} dimensions; an image batch has 4 ([N, 3, H, W] or [N, H, W, 3])`);
    let layout: GraphFacts['layout'];
    if (shape[1] === 3) layout = 'NCHW';
    else if (shape[3] === 3) layout = 'NHWC';
    else throw new ImportError(`input "${input}" has shape [${shape.join(', ')}]: no dimension 1 or 3 of size 3 (RGB or BGR)`);
    const [h, w] = layout === 'NCHW' ? [shape[2], shape[3]] : [shape[1], shape[2]];
    const hs = fixed(h);
    const ws = fixed(w);
    if (hs !== null && ws !== null && hs !== ws) throw new ImportError(`input "${input}" is ${hs}x${ws}; the service feeds square crops`);
    const size = hs ?? ws;
    const batch: GraphFacts['batch'] = fixed(shape[0]) === 1 ? 1 : 'dynamic';
    if (fixed(shape[0]) !== null && fixed(shape[0]) !== 1) throw new ImportError(`input "${input}" has a fixed batch of ${String(shape[0])}; 1 or a dynamic batch is needed`);
    // one score output: the only one, or the only one besides a features output is not
    // guessable, so more than one output is refused with the names
    if (session.outputNames.length !== 1) throw new ImportError(`the graph has ${session.outputNames.length} outputs (${session.outputNames.join(', ')}); import takes a graph with one score output (write the manifest by hand for others: models/README.md)`);
    const output = session.outputNames[0]!;
    // Probe with two different inputs to learn the output's width and whether rows are
    // probabilities; the size is a stand-in when the graph leaves it symbolic.
    const probeSize = size ?? 64;
    const n = batch === 1 ? 1 : 2;
    const dims = layout === 'NCHW' ? [n, 3, probeSize, probeSize] : [n, probeSize, probeSize, 3];
    const count = dims.reduce((a, b) => a * b, 1);
    const data = meta.type === 'uint8' ? new Uint8Array(count) : new Float32Array(count);
    for (let i = 0; i < count; i++) data[i] = meta.type === 'uint8' ? (i * 37) % 256 : ((i * 37) % 256) / 255;
    const out = (await session.run({ [input]: { data, dims } }, [output]))[output]!;
    const width = out.data.length / n;
    if (!Number.isInteger(width) || width < 1) throw new ImportError(`output "${output}" gave ${out.data.length} values for a batch of ${n}`);
    let rowsSumToOne = width >= 2;
    for (let r = 0; r < n && rowsSumToOne; r++) {
      let sum = 0;
      for (let c = 0; c < width; c++) {
        const v = out.data[r * width + c]!;
        if (!(v >= 0 && v <= 1)) rowsSumToOne = false;
        sum += v;
      }
      if (Math.abs(sum - 1) > 1e-3) rowsSumToOne = false;
    }
    return { input, dtype: meta.type, layout, size, batch, output, width, rowsSumToOne };
  } finally {
    await session.release();
  }
}

/** The questions still open for this graph, in the order a person would answer them. */
export function openQuestions(facts: GraphFacts, a: ImportAnswers): Question[] {
  const q: Question[] = [];
  const ask = (key: Question['key'], flag: string, prompt: string) => {
    if (a[key] === undefined) q.push({ key, flag, prompt });
  };
  ask('crop_fraction', '--crop-fraction', 'Centre part of the 320x320 face crop the graph was trained on (0-1, e.g. 0.8)');
  if (facts.size === null) ask('size', '--size', 'Square input size in pixels (the graph leaves it open)');
  ask('resize', '--resize', 'Resize used in training: area or bilinear');
  ask('channel_order', '--channel-order', 'Channel order: RGB or BGR');
  ask('scale', '--scale', 'Scale applied to 0-255 pixels first (e.g. 0.00392156862745098 for 1/255, or 1)');
  ask('mean', '--mean', 'Per-channel mean subtracted after scaling, three numbers (e.g. 0.485,0.456,0.406)');
  ask('std', '--std', 'Per-channel std divided by last, three numbers (e.g. 0.229,0.224,0.225)');
  // a multi-class output's kind is read from the probe (rows summing to 1: softmax; else logits)
  if (facts.width === 1) ask('output_kind', '--output-kind', 'The single output value is a logit or a probability');
  if (facts.width >= 2) ask('live_index', '--live-index', `Index of the live class among the ${facts.width} outputs (0-${facts.width - 1})`);
  return q;
}

const num = (v: string, what: string, ok: (x: number) => boolean): number => {
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || !ok(x)) throw new ImportError(`${what}: ${JSON.stringify(v)} is not allowed`);
  return x;
};
const triple = (v: string, what: string, ok: (x: number) => boolean): number[] => {
  const parts = v.split(/[\s,]+/).filter(Boolean);
  if (parts.length !== 3) throw new ImportError(`${what}: three numbers are needed (got ${JSON.stringify(v)})`);
  return parts.map((p) => num(p, what, ok));
};

/** Names a set may not take: MODELS_DIR's own folders that are not model sets (the shipped
 * graphs' builder) and names with a meaning elsewhere. */
export const RESERVED_SET_NAMES = new Set(['builder', 'node_modules', 'data', 'tmp']);

export interface ImportPlan {
  model_set: string;
  dir: string;
  manifest: Record<string, unknown>;
}

/** The manifest for the graph and the answers; throws ImportError naming a bad answer. */
export function planImport(modelsDir: string, file: string, facts: GraphFacts, a: ImportAnswers): ImportPlan {
  const name = a.name ?? `${basename(file).replace(/\.onnx$/i, '').replace(/[^A-Za-z0-9._-]/g, '_')}_v1`;
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(name) || name.startsWith('.')) throw new ImportError(`model set name ${JSON.stringify(name)}: letters, digits, . _ - only (at most 64)`);
  if (RESERVED_SET_NAMES.has(name.toLowerCase())) throw new ImportError(`model set name ${JSON.stringify(name)} is reserved (MODELS_DIR/${name} is not a model set); choose another --name`);
  const missing = openQuestions(facts, a);
  if (missing.length > 0) throw new ImportError(`the graph cannot tell these; give them as flags: ${missing.map((m) => `${m.flag} (${m.prompt})`).join('; ')}`);
  const resize = a.resize!.toLowerCase();
  if (resize !== 'area' && resize !== 'bilinear') throw new ImportError(`--resize: area or bilinear (got ${a.resize})`);
  const order = a.channel_order!.toUpperCase();
  if (order !== 'RGB' && order !== 'BGR') throw new ImportError(`--channel-order: RGB or BGR (got ${a.channel_order})`);
  let kind: string;
  if (facts.width === 1) {
    kind = a.output_kind!.toLowerCase();
    if (kind !== 'logit' && kind !== 'probability') throw new ImportError(`--output-kind: logit or probability for a one-value output (got ${a.output_kind})`);
  } else {
    kind = facts.rowsSumToOne ? 'softmax' : 'logits';
    if (a.output_kind !== undefined && a.output_kind.toLowerCase() !== kind) {
      throw new ImportError(`--output-kind ${a.output_kind}: the graph's ${facts.width}-value rows ${facts.rowsSumToOne ? 'sum to 1 (softmax)' : 'do not sum to 1 (logits)'}`);
    }
  }
  // a size the graph fixes is held to the manifest's range here, before anything is written:
  // past it the set could never load, and `--force` had already deleted the set it replaced
  if (facts.size !== null && !(Number.isInteger(facts.size) && facts.size >= 8 && facts.size <= 320)) {
    throw new ImportError(`the graph's input is ${facts.size} px square; the service feeds graphs 8 to 320 px (a crop is 320 px): export it for 320 px or less`);
  }
  const graph: Record<string, unknown> = {
    role: 'frame',
    file: 'frame.onnx',
    input: facts.input,
    output: facts.output,
    output_kind: kind,
    ...(facts.width >= 2 ? { live_index: num(a.live_index!, '--live-index', (x) => Number.isInteger(x) && x >= 0 && x < facts.width) } : {}),
    layout: facts.layout,
    dtype: facts.dtype,
    batch: facts.batch,
    crop_fraction: num(a.crop_fraction!, '--crop-fraction', (x) => x > 0 && x <= 1),
    size: facts.size ?? num(a.size!, '--size', (x) => Number.isInteger(x) && x >= 8 && x <= 320),
    resize,
    channel_order: order,
    scale: num(a.scale!, '--scale', (x) => x > 0),
    mean: triple(a.mean!, '--mean', () => true),
    std: triple(a.std!, '--std', (x) => x > 0),
  };
  const threshold = a.threshold === undefined ? 0.5 : num(a.threshold, '--threshold', (x) => x >= 0 && x <= 1);
  const trained = !a.untrained;
  const manifest = {
    format: MANIFEST_FORMAT,
    model_set: name,
    trained,
    description: `Imported from ${basename(file)} by models import. Threshold ${threshold} until calibrated (models calibrate).`,
    modules: {
      rgb_liveness: {
        graphs: [graph],
        modes: {
          rgb_single: { decision_policy: 'single_frame_v1', threshold },
          // no temporal head: a sequence is decided on the mean of its final window's frames
          rgb_sequence: { decision_policy: 'window_mean_v1', threshold, score_jump_limit: 0.5 },
        },
      },
    },
  };
  return { model_set: name, dir: join(modelsDir, name), manifest };
}

/** Writes the set's folder; refuses to replace an existing set unless `force`. `--force`
 * replaces a model set only: a folder without manifest.json (models/builder, anything an
 * operator keeps beside the sets) or a symbolic link is never deleted. */
export function writeImport(plan: ImportPlan, file: string, force: boolean): void {
  if (existsSync(plan.dir) || isLink(plan.dir)) {
    if (!force) throw new ImportExistsError(`${plan.dir} exists; choose another --name, or --force to replace it`);
    if (isLink(plan.dir) || !statSync(plan.dir).isDirectory() || !existsSync(join(plan.dir, 'manifest.json'))) {
      throw new ImportExistsError(`${plan.dir} is not a model set (no manifest.json in a folder of its own): --force replaces model sets only; choose another --name`);
    }
    rmSync(plan.dir, { recursive: true, force: true });
  }
  mkdirSync(plan.dir, { recursive: true });
  copyFileSync(file, join(plan.dir, 'frame.onnx'));
  writeFileSync(join(plan.dir, 'manifest.json'), `${JSON.stringify(plan.manifest, null, 2)}\n`);
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

export function readGraphFile(file: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new ImportError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}
