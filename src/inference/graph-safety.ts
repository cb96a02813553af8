// What a graph file may ask of the runtime beyond arithmetic, refused before any runtime sees
// the bytes (issue 40, findings 1 and 6). Every place that loads a graph (the pool workers,
// `auto`'s measurement threads, `models check`, `models import`, `models calibrate`) goes
// through ModuleRunner.load or readGraphFacts, which call graphFileProblem first.
//
// - External data: an initializer may keep its bytes in another file, named by a path inside
//   the graph. Loaded from bytes (as the service loads graphs), onnxruntime-node resolves a
//   relative path against the process's working directory, where DATA_DIR (signing keys, the
//   store) sits under `npm start`; the file's bytes then became weights and leaked through the
//   scores. The service loads self-contained graphs only: confining such paths to the set's
//   folder would still mean following a path an untrusted file chose (links, races), for a
//   feature a liveness graph (megabytes, far under protobuf's 2 GB) does not need.
// - Loop: the one standard operator whose iteration count is data (a trip count of 2^62 never
//   ends). A pool thread inside such a run cannot be stopped on the native backend (terminating
//   a thread inside onnxruntime-node aborts the process), and the CNNs this service runs have
//   no use for it. Other operators are bounded by their tensors' sizes; the time bound on
//   load and warm-up (model-sets.ts) covers a graph that is merely slow.
//
// The scan walks the protobuf wire format itself (protobuf-fields.ts, shared with webgpu-layout.ts), so the
// service needs no ONNX library at run time; a file it cannot walk is refused too.

import { fields, type Field } from './protobuf-fields.ts';

const decoder = new TextDecoder();
const text = (b: Uint8Array) => decoder.decode(b);
const show = (s: string) => JSON.stringify(s.length > 80 ? `${s.slice(0, 80)}...` : s);

class Refused extends Error {}

// Field numbers from onnx.proto (IR version 10).
// TensorProto: name 8, external_data 13 (StringStringEntryProto: key 1, value 2), data_location 14.
function tensor(buf: Uint8Array, where: string): void {
  let name = '';
  let location = '';
  let external = false;
  for (const f of fields(buf)) {
    if (f.no === 8 && f.bytes) name = text(f.bytes);
    else if (f.no === 13 && f.bytes) {
      external = true;
      let key = '';
      let value = '';
      for (const e of fields(f.bytes)) {
        if (e.no === 1 && e.bytes) key = text(e.bytes);
        else if (e.no === 2 && e.bytes) value = text(e.bytes);
      }
      if (key === 'location') location = value;
    } else if (f.no === 14 && f.varint !== undefined && f.varint !== 0) external = true;
  }
  if (external) {
    throw new Refused(`tensor ${show(name)} (${where}) is stored as external data${location ? ` in ${show(location)}` : ''}: the service loads only self-contained graphs (re-export with the weights inside the .onnx file, e.g. onnx.save_model(model, path, save_as_external_data=False))`);
  }
}

// SparseTensorProto: values 1, indices 2 (TensorProto each).
function sparse(buf: Uint8Array, where: string): void {
  for (const f of fields(buf)) if ((f.no === 1 || f.no === 2) && f.bytes) tensor(f.bytes, where);
}

// AttributeProto: t 5, g 6, tensors 10, graphs 11, sparse_tensor 22, sparse_tensors 23.
function attribute(buf: Uint8Array, where: string): void {
  for (const f of fields(buf)) {
    if (!f.bytes) continue;
    if (f.no === 5 || f.no === 10) tensor(f.bytes, where);
    else if (f.no === 6 || f.no === 11) graph(f.bytes, `a subgraph of ${where}`);
    else if (f.no === 22 || f.no === 23) sparse(f.bytes, where);
  }
}

// NodeProto: output 2, name 3, op_type 4, attribute 5, domain 7.
function node(buf: Uint8Array, where: string): void {
  let op = '';
  let name = '';
  let domain = '';
  const attrs: Uint8Array[] = [];
  for (const f of fields(buf)) {
    if (!f.bytes) continue;
    if (f.no === 3) name = text(f.bytes);
    else if (f.no === 4) op = text(f.bytes);
    else if (f.no === 7) domain = text(f.bytes);
    else if (f.no === 5) attrs.push(f.bytes);
  }
  if (op === 'Loop' && (domain === '' || domain === 'ai.onnx')) {
    throw new Refused(`node ${show(name)} (${where}) is a Loop, whose number of iterations is data and can be endless: the service refuses Loop (a run stuck in it cannot be stopped on the native backend), and a liveness graph has no need of it`);
  }
  for (const a of attrs) attribute(a, `node ${show(name)} (${op})`);
}

// GraphProto: node 1, initializer 5, sparse_initializer 15.
function graph(buf: Uint8Array, where: string): void {
  for (const f of fields(buf)) {
    if (!f.bytes) continue;
    if (f.no === 1) node(f.bytes, where);
    else if (f.no === 5) tensor(f.bytes, `an initializer of ${where}`);
    else if (f.no === 15) sparse(f.bytes, `a sparse initializer of ${where}`);
  }
}

// FunctionProto: node 7, attribute_proto 11. TrainingInfoProto: initialization 1, algorithm 2.
function fn(buf: Uint8Array): void {
  for (const f of fields(buf)) {
    if (!f.bytes) continue;
    if (f.no === 7) node(f.bytes, 'a model function');
    else if (f.no === 11) attribute(f.bytes, 'a model function');
  }
}

/**
 * Null when the graph file is self-contained and has no Loop; otherwise the problem in words
 * (the caller prefixes the graph's name). ModelProto: graph 7, training_info 20, functions 25.
 */
export function graphFileProblem(model: Uint8Array): string | null {
  try {
    let graphs = 0;
    for (const f of fields(model)) {
      if (!f.bytes) continue;
      if (f.no === 7) {
        graphs++;
        graph(f.bytes, 'the main graph');
      } else if (f.no === 25) fn(f.bytes);
      else if (f.no === 20) for (const g of fields(f.bytes)) if ((g.no === 1 || g.no === 2) && g.bytes) graph(g.bytes, 'training info');
    }
    if (graphs === 0) return 'is not an ONNX model (no graph in it)';
    return null;
  } catch (e) {
    if (e instanceof Refused) return e.message;
    return `is not an ONNX model this service can read (${(e as Error).message})`;
  }
}
