import { RGB8_BYTES } from '../contract/index.ts';

/** A 320x320 RGB crop of pseudo-random bytes from an LCG started at `seed`: the same pixels on
 * every run, for what must feed a graph without a real capture (the model check, auto's
 * start-up measurement, the frame bench). bench/cli-args.mjs keeps a plain-JavaScript copy,
 * because the .mjs benches load whichever build they compare and cannot import TypeScript. */
export function seededCrop(seed: number): Uint8Array {
  const px = new Uint8Array(RGB8_BYTES);
  let s = seed >>> 0;
  for (let i = 0; i < px.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    px[i] = s >>> 24;
  }
  return px;
}
