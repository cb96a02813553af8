import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { decodePng } from '../../src/images/index.ts';
import { eyeCrop320, sha256Hex } from '../../src/client/index.ts';
import { parseMetadata } from '../../src/packets/index.ts';
import { testPicture, TEST_EYES } from '../../src/cli/capture.ts';
import { runCli, tempDir } from '../helpers/server.ts';

// `capture` (issue 39 item 7): the crop of a photo, or of the drawn test picture, and the
// verify call for it. The call itself is sent to a real server in first-steps.test.ts.
const dir = tempDir();
const dataDir = tempDir();
// INIT_CWD: where `npm run` says the operator was; relative paths are read and written there
const cli = (args: string[]) => runCli(dataDir, ['capture', ...args], '', { INIT_CWD: dir });

/** A photo 900x700 with a pattern, so that a crop at other points differs. */
function photo(): { rgba: Buffer; width: number; height: number } {
  const width = 900;
  const height = 700;
  const rgba = Buffer.alloc(width * height * 4);
  for (let i = 0; i < width * height; i++) rgba.set([(i % width) & 255, Math.floor(i / width) & 255, (i * 7) & 255, 255], i * 4);
  return { rgba, width, height };
}

t.test('without a photo: the test picture, cropped at its eyes, and a call the server accepts', async (t) => {
  const r = await cli(['--out', 'first.png']);
  t.equal(r.code, 0, r.stderr);
  const out = r.json as { file: string; sha256: string; source_size: number[]; eyes_xy: number[][]; test_picture: boolean; metadata: any; curl: string };
  t.equal(out.file, path.join(dir, 'first.png'), 'written where the operator was');
  const bytes = fs.readFileSync(out.file);
  t.equal(sha256Hex(bytes), out.sha256, 'the sha256 is the file\'s');
  const pixels = decodePng(bytes);
  t.same(Buffer.from(pixels.subarray(0, 307_200)), Buffer.from(eyeCrop320(testPicture(), TEST_EYES)), 'the PNG holds the client package\'s eyeCrop320 of the test picture');
  t.same(out.source_size, [640, 480]);
  t.same(out.eyes_xy, [[280, 200], [360, 202]]);
  t.equal(out.test_picture, true);
  t.equal(out.metadata.frames[0].image.sha256, out.sha256);
  t.doesNotThrow(() => parseMetadata(JSON.stringify(out.metadata), 'rgb_liveness'), 'the server\'s rules accept the metadata');
  t.match(out.curl, /^curl -s http:\/\/127\.0\.0\.1:8080\/v1\/modules\/rgb_liveness\/verify -H "Authorization: Bearer \$LV_TOKEN"/);
  t.match(out.curl, '-H "Idempotency-Key: $(node -e "console.log(crypto.randomUUID())")"');
  t.match(out.curl, `-F f0=@first.png`);
  t.notMatch(out.curl, /lvk_/, 'no token is ever printed');

  const text = await cli(['--out', 'first.png', '--curl', '--url', 'https://liveness.example/']);
  t.equal(text.code, 0, text.stderr);
  t.equal(text.json, undefined, '--curl prints the shell command, not JSON');
  t.match(text.stdout, /^curl -s https:\/\/liveness\.example\/v1\/modules\/rgb_liveness\/verify /);
  t.match(text.stdout, `"sha256":"${out.sha256}"`, 'the same bytes: the same hash');
});

t.test('a PNG or a JPEG photo of any size, cropped at the eyes given', async (t) => {
  const { rgba, width, height } = photo();
  const png = new PNG({ width, height });
  rgba.copy(png.data);
  fs.writeFileSync(path.join(dir, 'face.png'), PNG.sync.write(png));
  fs.writeFileSync(path.join(dir, 'face.jpg'), jpeg.encode({ data: rgba, width, height }, 90).data);
  const eyes = [[401.5, 300], [480, 310]];
  const fromPng = await cli(['--image', 'face.png', '--eyes', '401.5,300,480,310', '--out', 'png-crop.png']);
  t.equal(fromPng.code, 0, fromPng.stderr);
  const p = fromPng.json as any;
  t.same([p.source_size, p.eyes_xy, p.test_picture], [[width, height], eyes, false]);
  const expected = eyeCrop320({ data: new Uint8Array(rgba), width, height }, eyes as any);
  t.same(Buffer.from(decodePng(fs.readFileSync(p.file)).subarray(0, 307_200)), Buffer.from(expected), 'the crop of the PNG\'s pixels');
  const fromJpeg = await cli(['--image', 'face.jpg', '--eyes', '401.5,300,480,310', '--out', 'jpg-crop.png']);
  t.equal(fromJpeg.code, 0, fromJpeg.stderr);
  t.same((fromJpeg.json as any).source_size, [width, height], 'a JPEG is read too');
  t.not((fromJpeg.json as any).sha256, p.sha256, 'lossy JPEG pixels: another crop');
});

t.test('what the server would refuse is refused here, exit 2, naming the problem', async (t) => {
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'not an image');
  const cases: [string[], RegExp][] = [
    [['--image', 'face.png'], /--eyes x0,y0,x1,y1 is required with --image/],
    [['--eyes', '1,2,3,4'], /--eyes goes with --image/],
    [['--image', 'face.png', '--eyes', '1,2,3'], /--eyes must be x0,y0,x1,y1/],
    [['--image', 'face.png', '--eyes', '480,300,400,300'], /server would refuse this capture: metadata\.frames\.0\.eyes_xy: eyes_xy must be sorted by x ascending/],
    [['--image', 'face.png', '--eyes', '100,100,1000,100'], /lies outside the 900x700 source image/],
    [['--image', 'missing.png', '--eyes', '1,2,30,4'], /cannot read missing\.png: ENOENT/],
    [['--image', 'notes.txt', '--eyes', '1,2,30,4'], /notes\.txt: neither a PNG nor a JPEG/],
    [['--bogus'], /Unknown option '--bogus'/],
  ];
  for (const [args, message] of cases) {
    const r = await cli([...args, '--out', 'never.png']);
    t.equal(r.code, 2, args.join(' '));
    t.match(r.stderr, message, args.join(' '));
  }
  t.notOk(fs.existsSync(path.join(dir, 'never.png')), 'nothing written for a refused capture');
});
