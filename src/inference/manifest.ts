// The model-set manifest: the only thing the service reads to learn what to run.
// Operators deploy trained graphs by replacing files and editing this, so a wrong
// manifest must fail at start with a message that names the field.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, normalize, resolve } from 'node:path';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import type { ModuleId } from '../contract/index.ts';

export const MANIFEST_FORMAT = 'liveness-model-set/1';
/** Largest batch the service ever sends to a dynamic-batch graph (spec: internal maximum 4). */
export const MAX_BATCH = 4;

const Str = Type.String({ minLength: 1, maxLength: 200 });
const Prob = Type.Number({ minimum: 0, maximum: 1 });

const OutputKind = Type.Union([
  Type.Literal('logit'),
  Type.Literal('probability'),
  Type.Literal('softmax'),
  Type.Literal('logits'),
]);

// Fields shared by every graph: which file, which tensors, what the score output means.
const graphCommon = {
  file: Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$' }),
  input: Str,
  output: Str,
  /** logit: one value, sigmoid gives the live probability; probability: already one;
   * softmax: class probabilities; logits: class logits to softmax. */
  output_kind: OutputKind,
  live_index: Type.Optional(Type.Integer({ minimum: 0, maximum: 1000 })),
};

// An image graph reads a centred sub-square of the 320 crop, resized, reordered and
// normalised as value = (pixel * scale - mean[c]) / std[c].
const ImageGraph = Type.Object(
  {
    role: Type.Union([Type.Literal('frame'), Type.Literal('color_difference'), Type.Literal('color_appearance')]),
    ...graphCommon,
    features_output: Type.Optional(Str),
    layout: Type.Union([Type.Literal('NCHW'), Type.Literal('NHWC')]),
    dtype: Type.Union([Type.Literal('float32'), Type.Literal('uint8')]),
    batch: Type.Union([Type.Literal('dynamic'), Type.Literal(1)]),
    crop_fraction: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
    size: Type.Integer({ minimum: 8, maximum: 320 }),
    /** area (default): each output pixel is the mean of the source area it covers;
     * bilinear: OpenCV INTER_LINEAR, half-pixel centres. See preprocess.ts. */
    resize: Type.Optional(Type.Union([Type.Literal('area'), Type.Literal('bilinear')])),
    channel_order: Type.Union([Type.Literal('RGB'), Type.Literal('BGR')]),
    scale: Type.Number({ exclusiveMinimum: 0 }),
    mean: Type.Array(Type.Number(), { minItems: 3, maxItems: 3 }),
    std: Type.Array(Type.Number({ exclusiveMinimum: 0 }), { minItems: 3, maxItems: 3 }),
  },
  { additionalProperties: false },
);

// The temporal head reads the final window's per-frame features as [1, T, F] float32.
const TemporalGraph = Type.Object(
  { role: Type.Literal('temporal'), ...graphCommon },
  { additionalProperties: false },
);

const GraphRole = Type.Object({
  role: Type.Union([
    Type.Literal('frame'),
    Type.Literal('temporal'),
    Type.Literal('color_difference'),
    Type.Literal('color_appearance'),
  ]),
});

const SingleMode = Type.Object(
  { decision_policy: Type.Literal('single_frame_v1'), threshold: Prob },
  { additionalProperties: false },
);

const SequenceMode = Type.Object(
  {
    decision_policy: Type.Union([Type.Literal('temporal_head_v1'), Type.Literal('window_mean_v1')]),
    threshold: Prob,
    min_final_frames: Type.Optional(Type.Integer({ minimum: 1, maximum: 20 })),
    score_jump_limit: Type.Number({ exclusiveMinimum: 0, maximum: 1 }),
  },
  { additionalProperties: false },
);

const ColorMode = Type.Object(
  {
    decision_policy: Type.Literal('color_fusion_v1'),
    threshold: Prob,
    fusion: Type.Object(
      { difference_weight: Type.Number(), appearance_weight: Type.Number(), bias: Type.Number() },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const Graphs = Type.Array(Type.Unknown(), { minItems: 1, maxItems: 16 });

const RgbModule = Type.Object(
  {
    graphs: Graphs,
    modes: Type.Object(
      { rgb_single: Type.Optional(SingleMode), rgb_sequence: Type.Optional(SequenceMode) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

const ColorModule = Type.Object(
  { graphs: Graphs, modes: Type.Object({ color: ColorMode }, { additionalProperties: false }) },
  { additionalProperties: false },
);

const ManifestSchema = Type.Object(
  {
    format: Type.Literal(MANIFEST_FORMAT),
    model_set: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }),
    trained: Type.Boolean(),
    description: Type.Optional(Type.String({ maxLength: 4000 })),
    modules: Type.Object(
      { rgb_liveness: Type.Optional(RgbModule), color_liveness: Type.Optional(ColorModule) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export type ImageGraphSpec = Static<typeof ImageGraph>;
export type TemporalGraphSpec = Static<typeof TemporalGraph>;
export type GraphSpec = ImageGraphSpec | TemporalGraphSpec;
export type GraphRoleName = GraphSpec['role'];
export type OutputKindName = Static<typeof OutputKind>;
export type SingleModeSpec = Static<typeof SingleMode>;
export type SequenceModeSpec = Static<typeof SequenceMode>;
export type ColorModeSpec = Static<typeof ColorMode>;

export interface RgbModuleSpec {
  graphs: GraphSpec[];
  modes: { rgb_single?: SingleModeSpec; rgb_sequence?: SequenceModeSpec };
}
export interface ColorModuleSpec {
  graphs: GraphSpec[];
  modes: { color: ColorModeSpec };
}

export interface Manifest {
  format: typeof MANIFEST_FORMAT;
  model_set: string;
  trained: boolean;
  description?: string;
  modules: { rgb_liveness?: RgbModuleSpec; color_liveness?: ColorModuleSpec };
  /** absolute directory the graph files are resolved against (not part of the JSON) */
  dir: string;
}

// Compiled once: the checks run at every start and every `models check`.
const checkManifest = TypeCompiler.Compile(ManifestSchema);
const checkRole = TypeCompiler.Compile(GraphRole);
const checkImageGraph = TypeCompiler.Compile(ImageGraph);
const checkTemporalGraph = TypeCompiler.Compile(TemporalGraph);

const ROLES_BY_MODULE: Record<ModuleId, readonly GraphRoleName[]> = {
  rgb_liveness: ['frame', 'temporal'],
  color_liveness: ['color_difference', 'color_appearance'],
};

/** Not an HTTP error: a manifest refused when a model set is loaded or checked; the module is
 * then not ready (verify answers 503 module_unavailable from readiness, not from this). */
export class ManifestError extends Error {
  constructor(message: string) {
    super(`manifest.json: ${message}`);
    this.name = 'ManifestError';
  }
}

function fieldPath(base: string, pointer: string): string {
  let out = base;
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(part) ? `[${part}]` : out === '' ? part : `.${part}`;
  }
  return out === '' ? '(root)' : out;
}

function literalValues(schema: TSchema): unknown[] | null {
  if ('const' in schema) return [schema.const];
  const anyOf = (schema as { anyOf?: TSchema[] }).anyOf;
  if (!anyOf) return null;
  const values: unknown[] = [];
  for (const s of anyOf) {
    if (!('const' in s)) return null;
    values.push(s.const);
  }
  return values;
}

function describe(schema: TSchema): string {
  const lits = literalValues(schema);
  if (lits) return lits.map((v) => JSON.stringify(v)).join(' or ');
  const s = schema as Record<string, unknown>;
  const bounds: string[] = [];
  if (s.minimum !== undefined) bounds.push(`>= ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) bounds.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined) bounds.push(`<= ${s.maximum}`);
  if (s.exclusiveMaximum !== undefined) bounds.push(`< ${s.exclusiveMaximum}`);
  switch (s.type) {
    case 'integer':
    case 'number':
      return `${s.type === 'integer' ? 'an integer' : 'a number'}${bounds.length ? ` ${bounds.join(' and ')}` : ''}`;
    case 'string':
      return s.pattern ? `a string matching ${s.pattern}` : `a string of ${s.minLength ?? 0} to ${s.maxLength ?? 'any'} characters`;
    case 'boolean':
      return 'true or false';
    case 'array':
      return s.minItems === s.maxItems && s.minItems !== undefined
        ? `an array of ${s.minItems} items`
        : `an array of ${s.minItems ?? 0} to ${s.maxItems ?? 'any'} items`;
    case 'object':
      return 'an object';
    default:
      return 'valid';
  }
}

function firstError<T extends TSchema>(check: TypeCheck<T>, value: unknown, base: string): ManifestError | null {
  if (check.Check(value)) return null;
  const err: ValueError | undefined = check.Errors(value).First();
  if (!err) return new ManifestError(`${base || '(root)'} is invalid`);
  const path = fieldPath(base, err.path);
  if (err.type === ValueErrorType.ObjectRequiredProperty) return new ManifestError(`${path} is required`);
  if (err.type === ValueErrorType.ObjectAdditionalProperties) return new ManifestError(`${path} is not an allowed field`);
  return new ManifestError(`${path} must be ${describe(err.schema)}`);
}

function checkGraph(moduleId: ModuleId, graph: unknown, base: string, dir: string): GraphSpec {
  const roleErr = firstError(checkRole, graph, base);
  if (roleErr) throw roleErr;
  const role = (graph as { role: GraphRoleName }).role;
  if (!ROLES_BY_MODULE[moduleId].includes(role)) {
    throw new ManifestError(`${base}.role must be ${ROLES_BY_MODULE[moduleId].map((r) => JSON.stringify(r)).join(' or ')} in ${moduleId}`);
  }
  const err = role === 'temporal' ? firstError(checkTemporalGraph, graph, base) : firstError(checkImageGraph, graph, base);
  if (err) throw err;
  const spec = graph as GraphSpec;
  if ((spec.output_kind === 'softmax' || spec.output_kind === 'logits') && spec.live_index === undefined) {
    throw new ManifestError(`${base}.live_index is required when output_kind is "${spec.output_kind}"`);
  }
  if (spec.role !== 'frame' && 'features_output' in spec && spec.features_output !== undefined) {
    throw new ManifestError(`${base}.features_output is only allowed on role "frame"`);
  }
  const file = normalize(spec.file);
  if (isAbsolute(file) || file.startsWith('..')) throw new ManifestError(`${base}.file must stay inside the model-set folder`);
  const full = join(dir, file);
  if (!existsSync(full) || !statSync(full).isFile()) throw new ManifestError(`${base}.file "${spec.file}" does not exist in ${dir}`);
  return spec;
}

function roleCount(graphs: GraphSpec[], role: GraphRoleName): number {
  return graphs.filter((g) => g.role === role).length;
}

function checkModuleGraphs(moduleId: ModuleId, mod: RgbModuleSpec | ColorModuleSpec, dir: string): void {
  const base = `modules.${moduleId}`;
  mod.graphs = (mod.graphs as unknown[]).map((g, i) => checkGraph(moduleId, g, `${base}.graphs[${i}]`, dir));
  const graphs = mod.graphs;
  if (moduleId === 'rgb_liveness') {
    const modes = (mod as RgbModuleSpec).modes;
    if (!modes.rgb_single && !modes.rgb_sequence) throw new ManifestError(`${base}.modes must name rgb_single or rgb_sequence`);
    if (roleCount(graphs, 'frame') === 0) throw new ManifestError(`${base}.graphs must hold at least one graph with role "frame"`);
    const seq = modes.rgb_sequence;
    const temporal = roleCount(graphs, 'temporal');
    if (seq?.decision_policy === 'temporal_head_v1') {
      if (temporal !== 1) throw new ManifestError(`${base}.graphs must hold exactly one graph with role "temporal" for decision_policy "temporal_head_v1"`);
      if (!graphs.some((g) => g.role === 'frame' && g.features_output !== undefined)) {
        throw new ManifestError(`${base}.graphs needs a "frame" graph with features_output for decision_policy "temporal_head_v1"`);
      }
    } else if (temporal > 0) {
      throw new ManifestError(`${base}.graphs has a "temporal" graph but modes.rgb_sequence.decision_policy is not "temporal_head_v1"`);
    }
  } else {
    if (roleCount(graphs, 'color_difference') === 0) throw new ManifestError(`${base}.graphs must hold at least one graph with role "color_difference"`);
    if (roleCount(graphs, 'color_appearance') === 0) throw new ManifestError(`${base}.graphs must hold at least one graph with role "color_appearance"`);
    graphs.forEach((g, i) => {
      // Phase differences are signed; a uint8 input cannot carry them.
      if (g.role === 'color_difference' && g.dtype !== 'float32') {
        throw new ManifestError(`${base}.graphs[${i}].dtype must be "float32" for role "color_difference"`);
      }
    });
  }
}

/** Reads and validates `<dir>/manifest.json`; throws a ManifestError naming the field. */
export function loadManifest(dir: string): Manifest {
  const path = join(dir, 'manifest.json');
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new ManifestError(`cannot be read from ${dir}: ${(e as Error).message}`);
  }
  const err = firstError(checkManifest, raw, '');
  if (err) throw err;
  const manifest = raw as Omit<Manifest, 'dir'>;
  const modules = manifest.modules;
  if (!modules.rgb_liveness && !modules.color_liveness) throw new ManifestError('modules must describe rgb_liveness or color_liveness');
  for (const id of ['rgb_liveness', 'color_liveness'] as const) {
    const mod = modules[id];
    if (mod) checkModuleGraphs(id, mod, dir);
  }
  // the name every verdict and /health/ready echo is the name the set is activated by: a copy
  // of a set under a new folder that kept the old name served its own thresholds under the
  // other set's name, so the two could not be told apart in any result
  const folder = basename(resolve(dir));
  if (manifest.model_set !== folder) {
    throw new ManifestError(`model_set is "${manifest.model_set}" but the set's folder is "${folder}": they must be the same (the name is echoed in every result)`);
  }
  return { ...manifest, dir };
}

/** min_final_frames is a deployment setting; the manifest may omit it (default 1). */
export function minFinalFrames(seq: SequenceModeSpec): number {
  return seq.min_final_frames ?? 1;
}
