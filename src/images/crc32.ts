// CRC-32 of PNG chunks (ISO 3309, as in zlib). node:zlib has a native crc32 from Node 20.15;
// the table version keeps older Node 20 releases working.

import * as zlib from 'node:zlib';

let table: Uint32Array | undefined;

function tableCrc32(data: Uint8Array, value = 0): number {
  if (!table) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
  }
  let c = ~value;
  for (let i = 0; i < data.length; i++) c = table[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

const native = (zlib as { crc32?: (data: Uint8Array, value?: number) => number }).crc32;

export const crc32: (data: Uint8Array, value?: number) => number =
  typeof native === 'function' ? (data, value = 0) => native(data, value) : tableCrc32;
