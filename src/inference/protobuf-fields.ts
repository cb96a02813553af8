// The protobuf wire format, read just far enough to walk an ONNX graph (field numbers, varints,
// length-delimited bytes) without an ONNX library at run time. Used by graph-safety.ts (what a
// graph may ask of the runtime) and webgpu-layout.ts (which layout a graph gets on WebGPU).

/** A protobuf field as the scanner sees it: varints as numbers, the rest as bytes. */
export interface Field {
  no: number;
  varint?: number;
  bytes?: Uint8Array;
}

/** Reads one base-128 varint at `at` (at most 10 bytes); exact up to 2^53, which any
 * dimension or length is. */
export function varintAt(buf: Uint8Array, at: number): [value: number, next: number] {
  let v = 0;
  let mul = 1;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    const b = buf[i]!;
    v += (b & 0x7f) * mul;
    if (b < 0x80) return [v, i + 1];
    mul *= 128;
  }
  throw new Error('truncated varint');
}

/** The fields of one message, in order; throws on a truncated or unknown wire type. */
export function* fields(buf: Uint8Array): Generator<Field> {
  let i = 0;
  while (i < buf.length) {
    const [key, afterKey] = varintAt(buf, i);
    i = afterKey;
    const no = Math.floor(key / 8);
    const wire = key % 8;
    if (wire === 0) {
      const [v, next] = varintAt(buf, i);
      i = next;
      yield { no, varint: v };
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else if (wire === 2) {
      const [n, start] = varintAt(buf, i);
      if (start + n > buf.length) throw new Error('truncated field');
      i = start + n;
      yield { no, bytes: buf.subarray(start, i) };
    } else throw new Error(`unsupported wire type ${wire}`);
    if (i > buf.length) throw new Error('truncated field');
  }
}
