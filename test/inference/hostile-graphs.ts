// Graphs an attacker (or a careless exporter) could hand an operator, built here so their
// behaviour is known: one whose weights are stored as ONNX external data pointing at a file
// beside the service (issue 40, finding 1), and one that never finishes (a Loop with a
// trip count of 2^62: finding 6). Both are otherwise the brightness scorer of
// test-graphs.ts, so a set built on them passes every other check.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;
const BOOL = onnx.TensorProto.DataType.BOOL;

const f32 = (values: number[]) => new Uint8Array(new Float32Array(values).buffer);
const i64 = (values: bigint[]) => new Uint8Array(new BigInt64Array(values).buffer);

function tensorInfo(name: string, elemType: number, dims: (number | string)[]): onnxProto.onnx.IValueInfoProto {
  return { name, type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } } };
}

function node(opType: string, input: string[], output: string[], attribute: onnxProto.onnx.IAttributeProto[] = []): onnxProto.onnx.INodeProto {
  return { opType, input, output, name: output[0], attribute };
}

/** input [N, 3, size, size] -> channel means [N, 3] -> Gemm with weights w [1, 3] and bias
 * `bias` (an initializer the caller supplies) -> `pre` [N, 1] */
function brightness(size: number, bias: onnxProto.onnx.ITensorProto): { nodes: onnxProto.onnx.INodeProto[]; inits: onnxProto.onnx.ITensorProto[] } {
  const k = 8 / 3;
  return {
    nodes: [
      node('GlobalAveragePool', ['input'], ['gap']),
      node('Flatten', ['gap'], ['m3'], [{ name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: 1 }]),
      node('Gemm', ['m3', 'w', bias.name!], ['pre'], [{ name: 'transB', type: onnx.AttributeProto.AttributeType.INT, i: 1 }]),
    ],
    inits: [{ name: 'w', dims: [1, 3], dataType: FLOAT, rawData: f32([k, k, k]) }, bias],
  };
}

function encode(name: string, nodes: onnxProto.onnx.INodeProto[], inits: onnxProto.onnx.ITensorProto[], size: number): Uint8Array {
  const model: onnxProto.onnx.IModelProto = {
    irVersion: 8,
    producerName: 'liveness-test',
    opsetImport: [{ domain: '', version: 13 }],
    graph: { name, node: nodes, initializer: inits, input: [tensorInfo('input', FLOAT, ['N', 3, size, size])], output: [tensorInfo('score', FLOAT, ['N', 1])] },
  };
  return onnx.ModelProto.encode(onnx.ModelProto.create(model)).finish();
}

/** The bias of the brightness scorer stored as external data: 4 bytes at `location`
 * (relative to wherever the runtime resolves it: a runtime loading from bytes uses its CWD). */
export function externalDataGraph(size: number, location: string): Uint8Array {
  const bias: onnxProto.onnx.ITensorProto = {
    name: 'b', dims: [1], dataType: FLOAT, dataLocation: onnx.TensorProto.DataLocation.EXTERNAL,
    externalData: [{ key: 'location', value: location }, { key: 'offset', value: '0' }, { key: 'length', value: '4' }],
  };
  const { nodes, inits } = brightness(size, bias);
  nodes.push(node('Identity', ['pre'], ['score']));
  return encode('external_data', nodes, inits, size);
}

/** The brightness scorer plus a Loop of 2^62 iterations whose result is added times 0: a
 * graph that loads and, run, never finishes. */
export function endlessGraph(size: number): Uint8Array {
  const { nodes, inits } = brightness(size, { name: 'b', dims: [1], dataType: FLOAT, rawData: f32([-4]) });
  const body: onnxProto.onnx.IGraphProto = {
    name: 'body',
    input: [tensorInfo('iter', INT64, []), tensorInfo('cond_in', BOOL, []), tensorInfo('v_in', FLOAT, [1])],
    output: [tensorInfo('cond_out', BOOL, []), tensorInfo('v_out', FLOAT, [1])],
    node: [node('Identity', ['cond_in'], ['cond_out']), node('Add', ['v_in', 'one'], ['v_out'])],
    initializer: [{ name: 'one', dims: [1], dataType: FLOAT, rawData: f32([1]) }],
  };
  inits.push(
    { name: 'trips', dims: [], dataType: INT64, rawData: i64([1n << 62n]) },
    { name: 'go', dims: [], dataType: BOOL, rawData: new Uint8Array([1]) },
    { name: 'zero', dims: [1], dataType: FLOAT, rawData: f32([0]) },
  );
  // the loop's start value comes from the input, so no optimiser can fold it away at load
  nodes.push(
    node('ReduceMean', ['input'], ['mean_all'], [{ name: 'keepdims', type: onnx.AttributeProto.AttributeType.INT, i: 0 }]),
    node('Reshape', ['mean_all', 'shape1'], ['start']),
    node('Loop', ['trips', 'go', 'start'], ['v_end'], [{ name: 'body', type: onnx.AttributeProto.AttributeType.GRAPH, g: body }]),
    node('Mul', ['v_end', 'zero'], ['nothing']),
    node('Add', ['pre', 'nothing'], ['score']),
  );
  inits.push({ name: 'shape1', dims: [1], dataType: INT64, rawData: i64([1n]) });
  return encode('endless', nodes, inits, size);
}

/** A one-graph rgb_liveness set named `name` in `root` around `graph` (32x32 input). */
export function writeSet(root: string, name: string, graph: Uint8Array): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'frame.onnx'), graph);
  const g = {
    role: 'frame', file: 'frame.onnx', input: 'input', output: 'score', output_kind: 'logit',
    layout: 'NCHW', dtype: 'float32', batch: 'dynamic', crop_fraction: 1, size: 32, channel_order: 'RGB',
    scale: 1 / 255, mean: [0, 0, 0], std: [1, 1, 1],
  };
  const manifest = {
    format: 'liveness-model-set/1', model_set: name, trained: true,
    modules: {
      rgb_liveness: {
        graphs: [g],
        modes: {
          rgb_single: { decision_policy: 'single_frame_v1', threshold: 0.5 },
          rgb_sequence: { decision_policy: 'window_mean_v1', threshold: 0.5, score_jump_limit: 1 },
        },
      },
    },
  };
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
  return dir;
}

/** The brightness scorer plus `steps` chained [n, n] matrix products built from the input at
 * run time (so no optimiser computes them at load): finite, but with n = 2048 each product
 * is 1.7e10 multiply-adds, seconds on WASM. Its extra term is exactly 0 added to the score. */
export function slowGraph(size: number, n: number, steps: number): Uint8Array {
  const { nodes, inits } = brightness(size, { name: 'b', dims: [1], dataType: FLOAT, rawData: f32([-4]) });
  inits.push(
    { name: 'zero', dims: [1], dataType: FLOAT, rawData: f32([0]) },
    { name: 'inv_n', dims: [1], dataType: FLOAT, rawData: f32([1 / n]) },
    { name: 'shape_nn', dims: [2], dataType: INT64, rawData: i64([BigInt(n), BigInt(n)]) },
    { name: 'shape1', dims: [1], dataType: INT64, rawData: i64([1n]) },
  );
  nodes.push(
    node('ReduceMean', ['input'], ['mean_all'], [{ name: 'keepdims', type: onnx.AttributeProto.AttributeType.INT, i: 0 }]),
    node('Reshape', ['mean_all', 'shape1'], ['mean1']),
    node('Mul', ['mean1', 'zero'], ['z1']),
    node('Add', ['z1', 'inv_n'], ['c']),
    node('Expand', ['c', 'shape_nn'], ['x0']),
  );
  let x = 'x0';
  for (let i = 1; i <= steps; i++) {
    nodes.push(node('MatMul', [x, 'x0'], [`x${i}`]));
    x = `x${i}`;
  }
  nodes.push(
    node('ReduceMean', [x], ['xm'], [{ name: 'keepdims', type: onnx.AttributeProto.AttributeType.INT, i: 0 }]),
    node('Reshape', ['xm', 'shape1'], ['xm1']),
    node('Mul', ['xm1', 'zero'], ['nothing']),
    node('Add', ['pre', 'nothing'], ['score']),
  );
  return encode('slow', nodes, inits, size);
}

/** The brightness scorer minus its mean over the batch: alone every crop scores 0, in a batch
 * each is scored against its neighbours. A dynamic-batch graph the service must not serve. */
export function batchDependentGraph(size: number): Uint8Array {
  const { nodes, inits } = brightness(size, { name: 'b', dims: [1], dataType: FLOAT, rawData: f32([-4]) });
  nodes.push(
    node('ReduceMean', ['pre'], ['batch_mean'], [{ name: 'axes', type: onnx.AttributeProto.AttributeType.INTS, ints: [0] }, { name: 'keepdims', type: onnx.AttributeProto.AttributeType.INT, i: 1 }]),
    node('Sub', ['pre', 'batch_mean'], ['score']),
  );
  return encode('batch_dependent', nodes, inits, size);
}

/** An If whose branch holds a Loop: the scan must look inside subgraphs. */
export function nestedLoopGraph(size: number): Uint8Array {
  const bytes = endlessGraph(size);
  const model = onnx.ModelProto.decode(bytes);
  const g = model.graph!;
  const loopNode = g.node!.find((n) => n.opType === 'Loop')!;
  const branch = (name: string): onnxProto.onnx.IGraphProto => ({ name, node: [loopNode], output: [tensorInfo('v_end', FLOAT, [1])] });
  const cond = { name: 'always', dims: [], dataType: BOOL, rawData: new Uint8Array([1]) };
  g.initializer!.push(cond);
  g.node = g.node!.map((n) => (n === loopNode
    ? node('If', ['always'], ['v_end'], [
      { name: 'then_branch', type: onnx.AttributeProto.AttributeType.GRAPH, g: branch('then') },
      { name: 'else_branch', type: onnx.AttributeProto.AttributeType.GRAPH, g: branch('else') },
    ])
    : n));
  return onnx.ModelProto.encode(model).finish();
}
