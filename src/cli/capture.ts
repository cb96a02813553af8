import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { buildCapture, encodePng, eyeCrop320, isPng, type EyePair, type SourceImage } from '../client/index.ts';
import { ValidationFailure } from '../errors/index.ts';
import { parseMetadata } from '../packets/index.ts';
import { operatorPath, TextOutput, type Command } from './command.ts';
import { UsageError } from './errors.ts';

// `capture` (issue 39): a first capture a newcomer can send, with no capture app yet. It crops
// a photo at the eye points given (or a drawn test picture) with the client package's
// eyeCrop320, the crop every real client makes, writes the PNG, and prints the verify call with
// the metadata, the part and its sha256 filled in. The metadata is checked with the server's own
// rules first, so a call it prints is one the server accepts.

/** The test picture: 640x480, a face-coloured oval with two dark eyes at TEST_EYES (the points
 * the README's example uses). It is no face to a trained model; it makes a well-formed call. */
export const TEST_SIZE = [640, 480] as const;
export const TEST_EYES: EyePair = [[280, 200], [360, 202]];

export function testPicture(): SourceImage {
  const [w, h] = TEST_SIZE;
  const data = new Uint8Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = (y * w + x) * 3;
      // background: a soft vertical gradient
      let rgb = [90 + Math.round((y / h) * 60), 110, 140];
      const fx = (x - 320) / 130;
      const fy = (y - 240) / 170;
      if (fx * fx + fy * fy <= 1) rgb = [224, 182, 150];
      for (const [ex, ey] of TEST_EYES) {
        if ((x - ex) ** 2 + ((y - ey) * 1.8) ** 2 <= 14 ** 2) rgb = [40, 30, 30];
      }
      if (Math.abs(x - 320) <= 40 && y >= 318 && y <= 326) rgb = [150, 70, 70];
      data.set(rgb, o);
    }
  }
  return { data, width: w, height: h };
}

/** A PNG or JPEG file of any size as RGB or RGBA pixels (the crop ignores alpha). */
export function decodePhoto(bytes: Buffer, file: string): SourceImage {
  try {
    if (isPng(bytes)) {
      const png = PNG.sync.read(bytes);
      return { data: new Uint8Array(png.data.buffer, png.data.byteOffset, png.data.length), width: png.width, height: png.height };
    }
    if (bytes[0] === 0xff && bytes[1] === 0xd8) {
      // a phone photo is ~12 Mpx: 48 MB of RGBA, well inside the limit set here
      const img = jpeg.decode(bytes, { useTArray: true, formatAsRGBA: false, maxMemoryUsageInMB: 1024 });
      return { data: img.data, width: img.width, height: img.height };
    }
  } catch (e) {
    throw new UsageError(`${file}: not a readable PNG or JPEG (${(e as Error).message})`);
  }
  throw new UsageError(`${file}: neither a PNG nor a JPEG file (convert it to one of them)`);
}

function eyesOf(text: string): EyePair {
  const n = text.split(',').map((v) => Number(v.trim()));
  if (n.length !== 4 || !n.every(Number.isFinite)) throw new UsageError(`--eyes must be x0,y0,x1,y1 in the photo's pixels, the left eye first (got ${text})`);
  return [[n[0]!, n[1]!], [n[2]!, n[3]!]];
}

/** POSIX shell single quotes: the text as one word, whatever it holds. */
export function shellQuote(text: string): string {
  return /^[A-Za-z0-9_./:@%+=-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}


export const captureCommands: Record<string, Command> = {
  capture: {
    usage: 'capture [--image photo.png|.jpg --eyes x0,y0,x1,y1] [--out crop.png] [--url URL] [--curl]   a first capture to send: the eye_crop_320_v1 crop, its metadata and the verify call (README "First steps")',
    noStore: true,
    async run(_store, args, ctx) {
      const { values } = parseArgs({
        args,
        options: { image: { type: 'string' }, eyes: { type: 'string' }, out: { type: 'string', default: 'crop.png' }, url: { type: 'string' }, curl: { type: 'boolean' } },
      });
      if (values.image !== undefined && values.eyes === undefined) {
        throw new UsageError('--eyes x0,y0,x1,y1 is required with --image: where the two eyes are in the photo, in its pixels (an image viewer shows them)');
      }
      let source: SourceImage;
      if (values.image === undefined) {
        if (values.eyes !== undefined) throw new UsageError('--eyes goes with --image (without one, the test picture is cropped at its own eyes)');
        source = testPicture();
      } else {
        const file = operatorPath(ctx, values.image);
        let bytes: Buffer;
        try {
          bytes = fs.readFileSync(file);
        } catch (e) {
          throw new UsageError(`cannot read ${values.image}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        }
        source = decodePhoto(bytes, values.image);
      }
      const eyes = values.eyes === undefined ? TEST_EYES : eyesOf(values.eyes);
      const sourceSize: [number, number] = [source.width, source.height];
      const crop = encodePng(eyeCrop320(source, eyes));
      const built = buildCapture({
        mode: 'rgb_single',
        frames: [{ timestamp_us: 0, source_size: sourceSize, eyes_xy: [[eyes[0][0], eyes[0][1]], [eyes[1][0], eyes[1][1]]], image: { bytes: crop, part: 'f0' } }],
      });
      const metadata = JSON.stringify(built.metadata);
      // the server's own rules: eyes outside the photo, not sorted by x, too close ...
      try {
        parseMetadata(metadata, 'rgb_liveness');
      } catch (e) {
        if (e instanceof ValidationFailure) throw new UsageError(`the server would refuse this capture: ${e.detail.map((d) => `${d.loc.slice(1).join('.')}: ${d.msg}`).join('; ')}`);
        throw e;
      }
      const out = operatorPath(ctx, values.out);
      try {
        fs.writeFileSync(out, crop);
      } catch (e) {
        // a folder that is missing, a folder given as the file, no permission: the operator's to fix
        throw new UsageError(`cannot write ${out}: ${(e as Error).message}`);
      }
      const { config } = ctx;
      const base = (values.url ?? `${config.TLS_CERT_FILE ? 'https' : 'http'}://${config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST}:${config.PORT}`).replace(/\/+$/, '');
      // the token stays out of the printed text (and so out of logs and shell history): the
      // call reads it from LV_TOKEN; a fresh Idempotency-Key each time it is run
      const curl = [
        `curl -s ${shellQuote(`${base}/v1/modules/rgb_liveness/verify`)} -H "Authorization: Bearer $LV_TOKEN"`,
        '  -H "Idempotency-Key: $(node -e "console.log(crypto.randomUUID())")"',
        `  -F ${shellQuote(`metadata=${metadata}`)}`,
        `  -F ${shellQuote(`f0=@${values.out}`)}`,
      ].join(' \\\n');
      if (values.curl) return new TextOutput(`${curl}\n`);
      return { file: out, sha256: built.metadata.frames[0]!.image!.sha256, source_size: sourceSize, eyes_xy: eyes, test_picture: values.image === undefined, metadata: built.metadata, curl };
    },
  },
};
