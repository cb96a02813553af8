// CPU per frame of each stage a PNG capture goes through, in the service and in the FastAPI
// peer, on the load generator's own image (load.mjs: 320x320, Sub filter, zlib level 6,
// ~180 KB): the service's decode (checks, CRCs, inflate, unfilter, into a frame-slab slot as a
// verify call does), its inflate alone, node's zlib.inflateSync, and the tiny128 resize
// (320 -> 128 bilinear, as side-by-side deploys it); the peer's Pillow decode, CPython's
// zlib.decompress and OpenCV's blobFromImage (Debian's /usr/bin/python3, when it has them).
//
//   npm run build && PEERS_DIR=/tmp/peers-perf node bench/png-stages-cpu.mjs [--from DIR]
//     [--baseline DIR] [--rounds 3] [--calls 1000] [--filter 0|1|2|3|4|cycle|adaptive] [--png FILE]
//
// --filter: the same pixels encoded by the service's own encoder (src/images/png-encode.ts)
// with that filter on every row instead of load.mjs's Sub (real clients' encoders choose per row).
// --png: a 320x320 RGB PNG of one's own, decoded as it is: for instance the eye crop of a photo
// that the CLI's `capture --image` writes with the client's encoder, which picks Paeth or
// Average for nearly every row of a photograph (the eyes from test/capture/faces.json, photo
// coordinates: crop origin + eyes):
//   npm run cli --silent -- capture --image node_modules/@vladmandic/face-api/demo/sample3.jpg \
//     --eyes 1115,316.3,1219.6,340 --out /tmp/f1.png
//
// CPU time (process.cpuUsage / time.process_time), not wall time: on the shared 2-core host a
// process waiting for a core is not charged, so the figures hold under other engineers' load
// far better than wall-clock timings (caches and the other thread on the core still move them:
// compare within one run, rounds interleaved). Each figure is the median of 5 blocks of
// calls/5 calls after 300 warm-up calls; the decode writes into 32 slots in turn, so its output
// is not always in cache, as in a batch32 call. --baseline runs another build's stages in the
// same rounds (the same process kind, a separate process per build and stage kind).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { opt, peersFolder, requireBuildsAndPeers, ROOT } from './tiny128-service.mjs';

const peers = peersFolder();

const FILTER = opt('filter', null);
const PNG_FILE = opt('png', null);
const FROM_DEFAULT = ROOT;
if (process.argv[2] === '--child') {
  await child(process.argv[3], process.argv[4], Number(process.argv[5]));
  process.exit(0);
}

const FROM = opt('from', FROM_DEFAULT);
const BASELINE = opt('baseline', null);
const ROUNDS = Number(opt('rounds', 3));
const CALLS = Number(opt('calls', 1000));
requireBuildsAndPeers([FROM, BASELINE].filter(Boolean), peers, 'dist/src/images/png-decode.js');

const PY = String.raw`
import io, struct, sys, time, zlib
import numpy as np, cv2
from PIL import Image
buf = sys.stdin.buffer.read(); calls = int(sys.argv[1])
pos = 8; idat = b''
while pos < len(buf):
    (ln,) = struct.unpack('>I', buf[pos:pos + 4])
    if buf[pos + 4:pos + 8] == b'IDAT': idat += buf[pos + 8:pos + 8 + ln]
    pos += 12 + ln
def dec():
    with Image.open(io.BytesIO(buf), formats=('PNG',)) as im:
        im.load(); return np.asarray(im)
rgb = dec()
def cpu(fn):
    for _ in range(300): fn()
    res = []
    for _ in range(5):
        c0 = time.process_time()
        for _ in range(calls // 5): fn()
        res.append((time.process_time() - c0) * 1000 / (calls // 5))
    return sorted(res)[2]
print('pillow decode (whole)\t%.4f' % cpu(dec))
print('python zlib.decompress\t%.4f' % cpu(lambda: zlib.decompress(idat)))
print('cv2.dnn.blobFromImage 320->128\t%.4f' % cpu(lambda: cv2.dnn.blobFromImage(rgb, scalefactor=1.0 / 255.0, size=(128, 128), swapRB=False, crop=False)))
`;

async function loadImage(from = FROM_DEFAULT) {
  // its pixels: what the decoder's JavaScript rows (the reference the SIMD rows are tested
  // against) make of it
  if (PNG_FILE !== null) {
    const png = new Uint8Array(readFileSync(PNG_FILE));
    const { inflate, unfilter } = await import(join(from, 'dist/src/images/png-decode.js'));
    return { pixels: Buffer.from(unfilter(new Uint8Array(inflate(idatOf(png))))), png };
  }
  const load = await import(join(peers, 'load.mjs'));
  const pixels = load.makePixels(1);
  if (FILTER === null) return { pixels, png: new Uint8Array(load.encodePng(pixels)) };
  const { encodePng } = await import(join(from, 'dist/src/images/png-encode.js'));
  return { pixels, png: new Uint8Array(encodePng(pixels, 320, 320, { filter: /^\d$/.test(FILTER) ? Number(FILTER) : FILTER })) };
}

/** The zlib stream of a PNG: its IDAT chunks' data, joined. */
function idatOf(png) {
  const idat = [];
  for (let pos = 8; pos < png.length;) {
    const len = new DataView(png.buffer, png.byteOffset + pos).getUint32(0);
    if (String.fromCharCode(...png.subarray(pos + 4, pos + 8)) === 'IDAT') idat.push(png.subarray(pos + 8, pos + 8 + len));
    pos += 12 + len;
  }
  return Buffer.concat(idat);
}

/** One build's stages, in this (child) process: prints "stage\tms" lines. */
async function child(from, kind, calls) {
  const { pixels, png } = await loadImage(from);
  const cpuMs = (fn) => {
    for (let i = 0; i < 300; i++) fn();
    const res = [];
    for (let r = 0; r < 5; r++) {
      const c0 = process.cpuUsage();
      for (let i = 0; i < calls / 5; i++) fn();
      const c = process.cpuUsage(c0);
      res.push((c.user + c.system) / 1000 / (calls / 5));
    }
    return res.sort((a, b) => a - b)[2];
  };
  const slab = new SharedArrayBuffer(320 * 1024 * 32);
  const slots = Array.from({ length: 32 }, (_, i) => new Uint8Array(slab, i * 320 * 1024, 320 * 1024));
  let k = 0;
  const next = () => slots[(k = (k + 1) & 31)];
  if (kind === 'decode') {
    const { decodePng, inflate, unfilter, unfilterInto } = await import(join(from, 'dist/src/images/png-decode.js'));
    const zlib = await import('node:zlib');
    const zdata = idatOf(png);
    if (Buffer.compare(Buffer.from(decodePng(png, next())), pixels) !== 0) throw new Error('decode does not round-trip');
    const raw = new Uint8Array(inflate(zdata));
    console.log(`service decodePng (whole, into a slot)\t${cpuMs(() => decodePng(png, next())).toFixed(4)}`);
    console.log(`service inflate (reused inflater)\t${cpuMs(() => inflate(zdata)).toFixed(4)}`);
    console.log(`service unfilter, JavaScript rows (into a slot)\t${cpuMs(() => unfilter(raw, next().subarray(0, 307200))).toFixed(4)}`);
    // the decoder's own rows (SIMD Sub and Up, then the copy into the slot) from its inflate
    // scratch; a build before them has no unfilterInto
    if (unfilterInto) {
      const scratch = inflate(zdata);
      console.log(`service unfilter, as decodePng runs it (into a slot)\t${cpuMs(() => unfilterInto(scratch, next().subarray(0, 307200))).toFixed(4)}`);
    }
    console.log(`node zlib.inflateSync\t${cpuMs(() => zlib.inflateSync(zdata)).toFixed(4)}`);
  } else {
    const { FramePreparer } = await import(join(from, 'dist/src/inference/preprocess.js'));
    const plan = { crop_fraction: 1, size: 128, resize: 'bilinear', channel_order: 'RGB', scale: 1 / 255, mean: [0, 0, 0], std: [1, 1, 1], layout: 'NCHW', dtype: 'float32' };
    const prep = new FramePreparer(plan);
    const dst = new Float32Array(3 * 128 * 128);
    for (const s of slots) s.set(pixels);
    console.log(`service resize tiny128 (320 -> 128 bilinear)\t${cpuMs(() => prep.write(next().subarray(0, 307200), dst, 0, 0, 3)).toFixed(4)}`);
  }
}

function run(cmd, args, input) {
  const r = spawnSync(cmd, args, { input, encoding: input ? undefined : 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) return { error: (r.stderr?.toString() || r.error?.message || '').trim().split('\n').pop() };
  return { lines: r.stdout.toString().trim().split('\n').map((l) => l.split('\t')) };
}

const { png } = await loadImage(FROM);
const builds = [['service', FROM], ...(BASELINE ? [['baseline', BASELINE]] : [])];
const table = new Map(); // stage -> [ms per round]
const add = (stage, ms) => table.set(stage, [...(table.get(stage) ?? []), Number(ms)]);
let python = null;
for (let round = 1; round <= ROUNDS; round++) {
  for (const [name, dir] of builds) {
    for (const kind of ['decode', 'resize']) {
      const r = run(process.execPath, [fileURLToPath(import.meta.url), '--child', dir, kind, String(CALLS), ...(FILTER === null ? [] : ['--filter', FILTER]), ...(PNG_FILE === null ? [] : ['--png', PNG_FILE])]);
      if (r.error) throw new Error(`${name} ${kind}: ${r.error}`);
      for (const [stage, ms] of r.lines) add(`${name}: ${stage}`, ms);
    }
  }
  const py = run('/usr/bin/python3', ['-c', PY, String(CALLS)], Buffer.from(png));
  if (py.error) python = py.error;
  else for (const [stage, ms] of py.lines) add(`fastapi peer: ${stage}`, ms);
}
const source = PNG_FILE !== null ? PNG_FILE : `load.mjs makePixels(1)${FILTER === null ? '' : `, the service's encoder, filter ${FILTER}`}`;
console.log(`PNG ${png.length} bytes (${source}); CPU ms per frame, median of 5 blocks, per round; builds: service ${FROM}${BASELINE ? `, baseline ${BASELINE}` : ''}`);
console.log('');
console.log(`| stage | ${Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}`).join(' | ')} |`);
console.log(`|---|${'---|'.repeat(ROUNDS)}`);
for (const [stage, v] of [...table].sort((a, b) => a[0].split(': ')[1].localeCompare(b[0].split(': ')[1]))) {
  console.log(`| ${stage} | ${v.map((x) => x.toFixed(3)).join(' | ')} |`);
}
if (python) console.log(`\n(the FastAPI peer's stages were not run: ${python})`);
