// A small graph-building layer over onnx-proto: just the operators the shipped
// architectures use, with weights stored as raw little-endian float32 initialisers.
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;

/** opset 13: supported by onnxruntime-web's WASM and WebGPU kernels and by onnx-proto's IR 8. */
export const OPSET = 13;

export type Dim = number | string;

function valueInfo(name: string, dims: Dim[]): onnxProto.onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType: FLOAT,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function floatBytes(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i], true);
  return out;
}

export class GraphBuilder {
  private nodes: onnxProto.onnx.INodeProto[] = [];
  private initializers: onnxProto.onnx.ITensorProto[] = [];
  private inputs: onnxProto.onnx.IValueInfoProto[] = [];
  private outputs: onnxProto.onnx.IValueInfoProto[] = [];
  private counter = 0;

  constructor(private readonly name: string) {}

  private fresh(prefix: string): string {
    this.counter += 1;
    return `${prefix}_${this.counter}`;
  }

  input(name: string, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, dims));
    return name;
  }

  output(name: string, dims: Dim[]): void {
    this.outputs.push(valueInfo(name, dims));
  }

  weight(prefix: string, dims: number[], values: Float32Array): string {
    const name = this.fresh(prefix);
    this.initializers.push({ name, dims, dataType: FLOAT, rawData: floatBytes(values) });
    return name;
  }

  ints(prefix: string, values: number[]): string {
    const name = this.fresh(prefix);
    const raw = new Uint8Array(values.length * 8);
    const view = new DataView(raw.buffer);
    values.forEach((v, i) => view.setBigInt64(i * 8, BigInt(v), true));
    this.initializers.push({ name, dims: [values.length], dataType: INT64, rawData: raw });
    return name;
  }

  node(
    opType: string,
    inputs: string[],
    attrs: Record<string, number | number[]> = {},
    outName?: string,
  ): string {
    const out = outName ?? this.fresh(opType.toLowerCase());
    const attribute = Object.keys(attrs)
      .sort()
      .map((key): onnxProto.onnx.IAttributeProto => {
        const v = attrs[key];
        if (Array.isArray(v)) return { name: key, type: onnx.AttributeProto.AttributeType.INTS, ints: v };
        if (Number.isInteger(v)) return { name: key, type: onnx.AttributeProto.AttributeType.INT, i: v };
        return { name: key, type: onnx.AttributeProto.AttributeType.FLOAT, f: v };
      });
    this.nodes.push({ opType, input: inputs, output: [out], name: out, attribute });
    return out;
  }

  encode(docString: string): Uint8Array {
    const model: onnxProto.onnx.IModelProto = {
      irVersion: 8,
      producerName: 'liveness-model-builder',
      producerVersion: '1',
      docString,
      opsetImport: [{ domain: '', version: OPSET }],
      graph: {
        name: this.name,
        node: this.nodes,
        initializer: this.initializers,
        input: this.inputs,
        output: this.outputs,
      },
    };
    return onnx.ModelProto.encode(onnx.ModelProto.create(model)).finish();
  }
}
