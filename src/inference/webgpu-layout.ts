// Which layout a graph gets on onnxruntime-web's WebGPU execution provider. By default the
// provider rewrites Conv to channels-last (NHWC) and picks its vectorised matmul kernel
// (conv2d_mm_webgpu.cc, `is_vec4`) whenever the input channels are a multiple of 4 or of 3
// and the output channels a multiple of 4. With a multiple of 3 it reads the input three
// scalars at a time but indexes the channel as `xCh / 4`, which is right only while xCh is
// 0, i.e. for exactly 3 channels. A Conv over 6, 9, 15, ... channels therefore reads the
// wrong input channels and computes a different answer, silently (onnxruntime 1.30; issue
// microsoft/onnxruntime#29651). raw_v1's colour difference branch takes 9 channels (three
// phase differences), and so does every graph written to that contract: on WebGPU its
// logit was 1.0966 against WASM's 1.2817 on the same capture.
//
// Such a graph keeps its Conv in NCHW (session option preferredLayout), where the provider
// uses its scalar kernel and agrees with WASM to float rounding; every other graph keeps
// NHWC, the provider's faster default. The model is read here rather than trusted to a name
// or a role, so a trained graph with the same first layer is caught too.

import { fields, varintAt, type Field } from './protobuf-fields.ts';

const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** TensorProto name (field 8) and dims (field 1, packed or not). */
function tensorDims(tensor: Uint8Array): { name: string; dims: number[] } {
  const dims: number[] = [];
  let name = '';
  for (const f of fields(tensor)) {
    if (f.no === 1 && f.varint !== undefined) dims.push(f.varint);
    else if (f.no === 1 && f.bytes) {
      for (let i = 0; i < f.bytes.length;) {
        const [v, next] = varintAt(f.bytes, i);
        dims.push(v);
        i = next;
      }
    } else if (f.no === 8 && f.bytes) name = text(f.bytes);
  }
  return { name, dims };
}

interface ConvNode {
  weight: string;
  group: number;
}

/** The Conv nodes of a graph, and the shapes of its initialisers and Constant outputs. */
function scanGraph(graph: Uint8Array, convs: ConvNode[], shapes: Map<string, number[]>): void {
  for (const f of fields(graph)) {
    if (f.no === 5 && f.bytes) {
      const t = tensorDims(f.bytes);
      shapes.set(t.name, t.dims);
    } else if (f.no === 1 && f.bytes) {
      const inputs: string[] = [];
      const outputs: string[] = [];
      let op = '';
      let group = 1;
      let constant: number[] | null = null;
      for (const n of fields(f.bytes)) {
        if (n.no === 1 && n.bytes) inputs.push(text(n.bytes));
        else if (n.no === 2 && n.bytes) outputs.push(text(n.bytes));
        else if (n.no === 4 && n.bytes) op = text(n.bytes);
        else if (n.no === 5 && n.bytes) {
          let attr = '';
          let i: number | undefined;
          let t: Uint8Array | undefined;
          const subgraphs: Uint8Array[] = [];
          for (const a of fields(n.bytes)) {
            if (a.no === 1 && a.bytes) attr = text(a.bytes);
            else if (a.no === 3 && a.varint !== undefined) i = a.varint;
            else if (a.no === 5 && a.bytes) t = a.bytes;
            else if ((a.no === 6 || a.no === 11) && a.bytes) subgraphs.push(a.bytes);
          }
          if (attr === 'group' && i !== undefined) group = i;
          if (attr === 'value' && t) constant = tensorDims(t).dims;
          // If/Loop/Scan bodies may hold Conv nodes too
          for (const g of subgraphs) scanGraph(g, convs, shapes);
        }
      }
      if (op === 'Constant' && constant && outputs[0]) shapes.set(outputs[0], constant);
      if (op === 'Conv' && inputs[1]) convs.push({ weight: inputs[1], group });
    }
  }
}

/** True when the graph has a Conv the WebGPU provider computes wrongly in NHWC (see the
 * file's head): group 1, weight [out, in, kh, kw] (or [out, in, k]) with `in` a multiple of 3 but not of 4
 * and above 3, `out` a multiple of 4. A Conv whose weight shape is not in the file (a
 * computed weight) counts as affected, and so does a model this scanner cannot read:
 * NCHW is only slower, never wrong. */
export function hasMisreadConv(model: Uint8Array): boolean {
  const convs: ConvNode[] = [];
  const shapes = new Map<string, number[]>();
  try {
    for (const f of fields(model)) if (f.no === 7 && f.bytes) scanGraph(f.bytes, convs, shapes);
  } catch {
    return true;
  }
  return convs.some(({ weight, group }) => {
    const dims = shapes.get(weight);
    if (!dims) return true;
    // rank 3 is a Conv1d, which the provider runs as a Conv2d with a unit height
    if (group !== 1 || (dims.length !== 3 && dims.length !== 4)) return false;
    const [out, cin] = dims as [number, number];
    return cin > 3 && cin % 3 === 0 && cin % 4 !== 0 && out % 4 === 0;
  });
}

/** The WebGPU execution provider entry for one graph. */
export function webGpuProvider(model: Uint8Array): { name: 'webgpu'; preferredLayout?: 'NCHW' } {
  return hasMisreadConv(model) ? { name: 'webgpu', preferredLayout: 'NCHW' } : { name: 'webgpu' };
}
