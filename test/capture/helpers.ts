// Shared by the capture component's browser tests: the hand-marked faces, Y4M clips made from
// them for Chromium's fake camera, and a Chromium launched with that camera.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { CHROMIUM } from '../helpers/browser.ts';
import { ROOT } from '../helpers/server.ts';

export interface Face {
  name: string;
  photo: string;
  crop: [number, number, number, number];
  /** centre of each eye opening (midpoint of its corners) */
  eyes: [[number, number], [number, number]];
  /** centre of each iris */
  irises: [[number, number], [number, number]];
  pose: 'frontal' | 'three_quarter';
}

export const FACES: Face[] = (JSON.parse(fs.readFileSync(path.join(ROOT, 'test/capture/faces.json'), 'utf8')) as { faces: Face[] }).faces;
export const PHOTOS = path.join(ROOT, 'node_modules/@vladmandic/face-api/demo');

/** Why the camera tests cannot run here, or null. */
export function captureToolsMissing(): string | null {
  if (!fs.existsSync(CHROMIUM)) return `capture browser tests skipped: ${CHROMIUM} not found (apt-get install -y chromium; .ci/run does this as root)`;
  if (spawnSync('ffmpeg', ['-version']).status !== 0) return 'capture browser tests skipped: ffmpeg not found (apt-get install -y ffmpeg; .ci/run does this as root)';
  return null;
}

/** The face's 640x480 frame as RGB bytes, decoded by ffmpeg from the photograph. */
export function faceRgb(face: Face): Buffer {
  const [x, y, w, h] = face.crop;
  const r = spawnSync('ffmpeg', ['-v', 'error', '-i', path.join(PHOTOS, face.photo), '-vf', `crop=${w}:${h}:${x}:${y}`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], { maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg: ${r.stderr.toString()}`);
  return r.stdout;
}

/** The face's 640x480 frame as a PNG file (lossless), for pages that decode it themselves. */
export function facePng(face: Face): Buffer {
  const [x, y, w, h] = face.crop;
  const r = spawnSync('ffmpeg', ['-v', 'error', '-i', path.join(PHOTOS, face.photo), '-vf', `crop=${w}:${h}:${x}:${y}`, '-f', 'image2pipe', '-vcodec', 'png', '-pix_fmt', 'rgb24', '-'], { maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg: ${r.stderr.toString()}`);
  return r.stdout;
}

/** A Y4M clip (4:2:0, `fps` frames a second) of 640x480 frames: 'F' is the face, '.' a grey
 * frame with no face; the fake camera loops it. Written directly: a Y4M file is a header and
 * raw planes, the RGB to YUV conversion is BT.601 as ffmpeg's default. */
export function writeClip(file: string, face: Face, pattern: string, fps = 15): void {
  const W = 640;
  const H = 480;
  const rgb = faceRgb(face);
  const faceYuv = toYuv420(rgb, W, H);
  const grey = Buffer.alloc(W * H * 1.5, 128);
  grey.fill(110, 0, W * H);
  const parts: Buffer[] = [Buffer.from(`YUV4MPEG2 W${W} H${H} F${fps}:1 Ip A1:1 C420jpeg\n`)];
  for (const c of pattern) {
    parts.push(Buffer.from('FRAME\n'), c === 'F' ? faceYuv : grey);
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}

function toYuv420(rgb: Buffer, w: number, h: number): Buffer {
  const out = Buffer.alloc(w * h * 1.5);
  const u0 = w * h;
  const v0 = u0 + (w / 2) * (h / 2);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const o = (y * w + x) * 3;
      out[y * w + x] = Math.round(0.299 * rgb[o]! + 0.587 * rgb[o + 1]! + 0.114 * rgb[o + 2]!);
    }
  }
  for (let y = 0; y < h; y += 2) {
    for (let x = 0; x < w; x += 2) {
      let r = 0;
      let g = 0;
      let b = 0;
      for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [1, 1]] as const) {
        const o = ((y + dy) * w + x + dx) * 3;
        r += rgb[o]!;
        g += rgb[o + 1]!;
        b += rgb[o + 2]!;
      }
      r /= 4;
      g /= 4;
      b /= 4;
      const i = (y / 2) * (w / 2) + x / 2;
      out[u0 + i] = Math.max(0, Math.min(255, Math.round(128 - 0.168736 * r - 0.331264 * g + 0.5 * b)));
      out[v0 + i] = Math.max(0, Math.min(255, Math.round(128 + 0.5 * r - 0.418688 * g - 0.081312 * b)));
    }
  }
  return out;
}

/** Chromium with a fake camera that plays `clip` (or none). */
export async function launchWithCamera(clip?: string): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
      ...(clip ? [`--use-file-for-fake-video-capture=${clip}`] : []),
    ],
  });
}

/** Distance between two points. */
export const dist = (a: readonly number[], b: readonly number[]) => Math.hypot(b[0]! - a[0]!, b[1]! - a[1]!);
