// What the plain-JavaScript benches (engine, relay, idle-rss) share: their `--name value`
// options and the deterministic 320x320 RGB crops they feed the engine.

/** The value after `--name` on the command line, or `dflt`. */
export function opt(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
}

/** A 320x320 RGB crop of pseudo-random bytes (an LCG from `seed`): the same pixels every run.
 * The TypeScript one is src/inference/seeded-crop.ts; this copy stays because these benches
 * load whichever build they compare (a baseline may predate that file). */
export function seededCrop(seed) {
  const px = new Uint8Array(320 * 320 * 3);
  let s = seed >>> 0;
  for (let i = 0; i < px.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    px[i] = s >>> 24;
  }
  return px;
}
