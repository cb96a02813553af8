// The landmark engine: face-api's tiny face detector plus its 68-point landmark net, on
// TensorFlow.js's WASM backend. This module is a separate chunk of the bundle, imported only
// when a capture starts, so a page that shows the component but never starts it loads none of
// it; the weights and .wasm files are fetched from the integrator's origin (assetsUrl), never
// from a third party.
//
// Why face-api and not MediaPipe's face mesh: measured on this project's hand-marked test
// photographs and a 2-core host (docs/client.md "Capture component"), face-api's 68 points
// find the eye centres within the target, run above 15 frames a second on WASM, and its JS
// plus the two models it needs are about 2 MB, where face mesh's WASM and packed assets alone
// are over 10 MB.

import * as faceapi from '@vladmandic/face-api';
import { yawOf } from './guidance.ts';

export type Point = [number, number];

export interface FaceFinding {
  /** eye centres in source pixels, sorted by x (the image's left eye first) */
  eyes: [Point, Point];
  /** the face box of the detector, source pixels */
  box: { x: number; y: number; width: number; height: number };
  /** detector score in [0, 1] */
  score: number;
  /** the 68 landmarks (iBUG 300-W order: jaw 0-16, nose 27-35, eyes 36-47...), source pixels */
  landmarks: Point[];
  /** how far the head is turned aside (yawOf): 0 frontal, towards +-1 in profile */
  yaw: number;
}

export interface Engine {
  /** the TensorFlow.js backend in use: 'wasm', 'webgl' or 'cpu' */
  backend: string;
  /** the largest face of the frame and its eye centres, or null when there is none */
  find(frame: HTMLCanvasElement): Promise<FaceFinding | null>;
}

export interface EngineOptions {
  /** folder URL (ending in '/') holding models/ and wasm/ */
  assetsUrl: string;
  /** default 'auto': WASM, else WebGL, else the plain JS backend */
  backend?: 'auto' | 'wasm' | 'webgl' | 'cpu';
  /** detector input size (multiple of 32); default 160: a face with its eyes 40 pixels apart
   * in a 640-pixel frame (the nearest the guidance accepts) is still found, and the detector
   * costs half what it does at 224 (bench/capture.mjs) */
  inputSize?: number;
  /** detector score below which a box is not a face; default 0.5 */
  minScore?: number;
  /** face-api's 68-point landmark net: 'full' (350 kB) or 'tiny' (80 kB); default 'full' */
  landmarks?: 'full' | 'tiny';
}

let loading: Promise<Engine> | undefined;

/** Loads the models once per page; later calls share the same engine. */
export function loadEngine(o: EngineOptions): Promise<Engine> {
  loading ??= load(o).catch((e: unknown) => {
    loading = undefined; // a failed load (offline, 404) may be retried by the next capture
    throw e;
  });
  return loading;
}

async function load(o: EngineOptions): Promise<Engine> {
  const tf = faceapi.tf as unknown as {
    setBackend(name: string): Promise<boolean>;
    ready(): Promise<void>;
    getBackend(): string;
    setWasmPaths(prefix: string): void;
    env(): { set(flag: string, value: unknown): void };
  };
  const wanted = o.backend ?? 'auto';
  const order = wanted === 'auto' ? ['wasm', 'webgl', 'cpu'] : [wanted];
  tf.setWasmPaths(new URL('wasm/', o.assetsUrl).href);
  let chosen = '';
  for (const name of order) {
    try {
      if (await tf.setBackend(name)) {
        await tf.ready();
        chosen = name;
        break;
      }
    } catch {
      // this backend cannot start here (no WebGL in a GPU-less browser, no WASM): next one
    }
  }
  if (!chosen) throw new Error(`no TensorFlow.js backend could start (tried ${order.join(', ')})`);
  const models = new URL('models/', o.assetsUrl).href;
  const tiny = o.landmarks === 'tiny';
  await Promise.all([
    faceapi.nets.tinyFaceDetector.loadFromUri(models),
    tiny ? faceapi.nets.faceLandmark68TinyNet.loadFromUri(models) : faceapi.nets.faceLandmark68Net.loadFromUri(models),
  ]);
  const detectorOptions = new faceapi.TinyFaceDetectorOptions({ inputSize: o.inputSize ?? 160, scoreThreshold: o.minScore ?? 0.5 });

  return {
    backend: chosen,
    async find(frame) {
      // run(), not the task itself: face-api's tasks are thenables whose then() never passes
      // a failure on, so awaiting one whose model failed (a WASM kernel that threw) waited for
      // ever, the camera open and the guidance frozen, and the failure surfaced only as an
      // unhandled rejection
      const found = await faceapi.detectAllFaces(frame, detectorOptions).withFaceLandmarks(tiny).run();
      if (found.length === 0) return null;
      // the person in front of the camera is the largest face; a face behind them is ignored
      const best = found.reduce((a, b) => (b.detection.box.area > a.detection.box.area ? b : a));
      const { x, y, width, height } = best.detection.box;
      // face-api finds the landmarks in the detector's box cut out of the frame, clipped to it,
      // but places them by the uncut box's corner: a face whose box sticks out past the left or
      // top edge had every point moved out by that much (a test face 200 px to the left, its box
      // 33 px past the edge: the eyes read 27 and 35 px left of where they are, and were
      // accepted; further out, eyes outside the frame). Placed here from the clipped corner;
      // inside the frame, by the box's corner as face-api does (its cut starts at the corner
      // floored: the landmark test's faces read no better placed from there, within a pixel).
      const ox = Math.max(x, 0);
      const oy = Math.max(y, 0);
      const landmarks = best.unshiftedLandmarks.positions.map((p): Point => [p.x + ox, p.y + oy]);
      const mean = (from: number, to: number): Point => {
        const pts = landmarks.slice(from, to + 1);
        return [pts.reduce((s, p) => s + p[0], 0) / pts.length, pts.reduce((s, p) => s + p[1], 0) / pts.length];
      };
      // the eye openings, points 36-41 and 42-47 (face-api's getLeftEye and getRightEye)
      const a = mean(36, 41);
      const b = mean(42, 47);
      const eyes: [Point, Point] = a[0] <= b[0] ? [a, b] : [b, a];
      return { eyes, box: { x, y, width, height }, score: best.detection.score, landmarks, yaw: yawOf(landmarks) };
    },
  };
}
