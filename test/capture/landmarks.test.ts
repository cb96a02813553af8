import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/server.ts';
import { MAX_TURN, advise, boxLuma } from '../../capture/src/guidance.ts';
import type { FaceFinding } from '../../capture/src/engine.ts';
import { FACES, captureToolsMissing, dist, faceFrames, launchWithCamera, rgbToRgba, type Face } from './helpers.ts';
import { missingTool } from '../helpers/required.ts';

// The capture component's landmark engine in headless Chromium, loaded as an integrator's page
// loads it (capture.js from the fleet example's origin, the engine chunk, models and WASM files
// fetched lazily from there), on every hand-marked photograph of test/capture/faces.json. The
// eye centres it finds are compared with the hand-marked ones: mean error <= 5 % and worst
// <= 10 % of the eye distance (issue 41) over every face the component accepts for a capture;
// a head turned aside is not accepted (asked to turn to the camera). Also: nothing is fetched
// before a capture starts, nothing from another origin, and the component plus its models
// stay under 5 MB.
const missing = captureToolsMissing();
if (missing) {
  missingTool(t, missing);
} else {
  t.setTimeout(400_000);
  const { startFleetExample } = await import(pathToFileURL(path.join(ROOT, 'examples/fleet/server.mjs')).href) as {
    startFleetExample(o: { serviceUrl: string; businessToken: string }): Promise<{ url: string; componentFiles: Map<string, Buffer>; close(): Promise<void> }>;
  };
  // the page is never asked for here, so no service is needed behind the example
  const example = await startFleetExample({ serviceUrl: 'http://127.0.0.1:9', businessToken: 'lvk_unused' });
  t.teardown(() => example.close());
  const browser = await launchWithCamera();
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  page.setDefaultTimeout(240_000);
  const fetched: string[] = [];
  page.on('request', (r) => fetched.push(r.url()));
  await page.goto(`${example.url}/capture/`); // a 404 page on the example's origin

  t.test('importing capture.js loads no model; the engine loads on demand from the same origin', async (t) => {
    await page.evaluate(async () => {
      const url = '/capture/capture.js'; // a URL of the page's origin, not a module of this repository
      (window as unknown as { capture: unknown }).capture = await import(url);
    });
    t.same(fetched.filter((u) => /models\/|wasm\/|chunks\/engine/.test(u)), [], 'no engine, model or WASM file before a capture starts');
    const backend = await page.evaluate(async () => {
      const mod = (window as unknown as { capture: { loadLandmarks(): Promise<{ backend: string }> } }).capture;
      const engine = await mod.loadLandmarks();
      (window as unknown as { engine: unknown }).engine = engine;
      return engine.backend;
    });
    t.equal(backend, 'wasm', 'TensorFlow.js runs on its WASM backend');
    t.ok(fetched.some((u) => u.includes('/models/face_landmark_68_model.bin')), 'the models came from the page\'s origin');
    t.same(fetched.filter((u) => !u.startsWith(example.url)), [], 'nothing from another origin');
  });

  t.test('the component and what it loads stay under 5 MB', async (t) => {
    const total = [...example.componentFiles.values()].reduce((s, b) => s + b.length, 0);
    t.ok(total <= 5 * 1024 * 1024, `capture.js, its engine chunk, models and WASM: ${(total / 1e6).toFixed(2)} MB`);
  });

  // the head-turn gate's variants of each face (ffmpeg filters after the cut): a camera delivers
  // a face at any place and size
  const VARIANTS: [string, string][] = [
    ['mirrored', ',hflip'], ['yuv420', ',format=yuv420p,format=rgb24'], ['scaled 0.8', ',scale=512:384,pad=640:480:64:48'],
    ['zoomed 1.2', ',scale=768:576,crop=640:480:64:48'], ['shifted', ',crop=600:440:20:20,pad=640:480:0:0'], ['brighter', ',eq=brightness=0.08'],
  ];
  /** Each face's frame (RGB and PNG) and its variants' PNGs, from one ffmpeg run a face. */
  const made = new Map<string, { rgb: Buffer; pngs: Buffer[] }>();
  const framesOf = (face: Face) => {
    let f = made.get(face.name);
    if (!f) made.set(face.name, (f = faceFrames(face, ['', ...VARIANTS.map(([, filter]) => filter)])));
    return { rgba: rgbToRgba(f.rgb), png: f.pngs[0]!, variants: f.pngs.slice(1) };
  };

  /** The engine's finding on a PNG frame, in the page. */
  const find = (png: Buffer) => page.evaluate(async (png) => {
    const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
    const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const canvas = document.createElement('canvas');
    canvas.width = bitmap.width;
    canvas.height = bitmap.height;
    canvas.getContext('2d', { willReadFrequently: true })!.drawImage(bitmap, 0, 0);
    const engine = (window as unknown as { engine: { find(c: HTMLCanvasElement): Promise<FaceFinding | null> } }).engine;
    return engine.find(canvas);
  }, png.toString('base64'));

  t.test('eye centres against the hand-marked points, on every face the component accepts', async (t) => {
    // eyes_xy is the centre of each eye opening (the midpoint of its corners, README), which
    // the crop follows and which stays put when the person looks aside; the marks are that
    // point. A face is judged as the component judges a frame (advise: the guidance rules,
    // the head-turn gate among them): the accuracy target holds over the faces it accepts;
    // every face marked frontal must be accepted, the three-quarter one asked to turn. The
    // errors from the iris centres are printed too: they differ where the person looks away.
    const accepted: number[] = [];
    const all: number[] = [];
    const iris: number[] = [];
    for (const face of FACES) {
      const frames = framesOf(face);
      const found = await find(frames.png);
      if (!found) {
        t.fail(`${face.name}: no face found`);
        continue;
      }
      const advice = advise(found, 640, boxLuma(frames.rgba, found.box), null);
      const d = dist(face.eyes[0], face.eyes[1]);
      const e = [dist(found.eyes[0], face.eyes[0]) / d, dist(found.eyes[1], face.eyes[1]) / d];
      const ei = [dist(found.eyes[0], face.irises[0]) / d, dist(found.eyes[1], face.irises[1]) / d];
      all.push(...e);
      iris.push(...ei);
      if (advice === null) accepted.push(...e);
      const pct = (v: number[]) => v.map((x) => (x * 100).toFixed(1)).join(' %, ');
      t.comment(`${face.name} (${face.pose}): yaw ${found.yaw.toFixed(3)}, ${advice === null ? 'accepted' : `refused: ${advice}`}; found ${JSON.stringify(found.eyes.map((p) => p.map((v) => +v.toFixed(1))))}, marked ${JSON.stringify(face.eyes)}: ${pct(e)} % of ${d.toFixed(1)} px (from the irises: ${pct(ei)} %)`);
      if (face.pose === 'frontal') t.equal(advice, null, `${face.name}: a frontal face is accepted (yaw ${found.yaw.toFixed(3)}, limit ${MAX_TURN})`);
      else t.equal(advice, 'turn_to_camera', `${face.name}: a face turned aside is asked to turn to the camera (yaw ${found.yaw.toFixed(3)}, limit ${MAX_TURN})`);
    }
    const mean = (v: number[]) => v.reduce((s, x) => s + x, 0) / v.length;
    t.equal(all.length, FACES.length * 2, 'every face found');
    t.equal(accepted.length, FACES.filter((f) => f.pose === 'frontal').length * 2, 'the frontal faces, and only they, accepted');
    t.ok(mean(accepted) <= 0.05, `mean error over the accepted faces: ${(mean(accepted) * 100).toFixed(2)} % of the eye distance (<= 5 %)`);
    t.ok(Math.max(...accepted) <= 0.1, `worst error over the accepted faces: ${(Math.max(...accepted) * 100).toFixed(2)} % (<= 10 %)`);
    t.comment(`every face, the refused ones too: mean ${(mean(all) * 100).toFixed(2)} %, worst ${(Math.max(...all) * 100).toFixed(2)} %`);
    t.comment(`from the iris centres: mean ${(mean(iris) * 100).toFixed(2)} %, worst ${(Math.max(...iris) * 100).toFixed(2)} %`);
  });

  t.test('the head-turn gate decides the same on each face mirrored, rescaled, shifted, brightened and through 4:2:0', async (t) => {
    // MAX_TURN sits between the frontal faces' largest |yaw| and the three-quarter face's
    // smallest over the VARIANTS
    let frontalMax = 0;
    let turnedMin = Infinity;
    for (const face of FACES) {
      const yaws: string[] = [];
      const { variants } = framesOf(face);
      for (const [i, [name]] of VARIANTS.entries()) {
        const found = await find(variants[i]!);
        if (!found) {
          t.fail(`${face.name} ${name}: no face found`);
          continue;
        }
        const refused = Math.abs(found.yaw) > MAX_TURN;
        yaws.push(`${name} ${found.yaw.toFixed(3)}`);
        if (face.pose === 'frontal') frontalMax = Math.max(frontalMax, Math.abs(found.yaw));
        else turnedMin = Math.min(turnedMin, Math.abs(found.yaw));
        if (refused !== (face.pose !== 'frontal')) t.fail(`${face.name} ${name}: yaw ${found.yaw.toFixed(3)} ${refused ? 'refused' : 'accepted'}`);
      }
      t.comment(`${face.name} (${face.pose}): ${yaws.join(', ')}`);
    }
    t.ok(frontalMax < MAX_TURN && turnedMin > MAX_TURN, `frontal faces at most ${frontalMax.toFixed(3)}, the three-quarter face at least ${turnedMin.toFixed(3)}, limit ${MAX_TURN}`);
  });

  t.test('a face at the left edge, the detector\'s box past the frame: the eyes where they are', async (t) => {
    // face-api finds the landmarks in the box cut to the frame but placed them by the uncut box,
    // so a face whose box stuck out on the left read every point that far further left (27 to
    // 35 % of the eye distance on these two, accepted for a capture; capture/src/engine.ts).
    // Each face moved left until its box is some 33 px past the edge, as far as the detector
    // still finds it.
    for (const [name, shift] of [['f2', 200], ['f4', 230]] as const) {
      const face = FACES.find((f) => f.name === name)!;
      const { pngs } = faceFrames(face, [`,crop=${640 - shift}:480:${shift}:0,pad=640:480:0:0:color=gray`]);
      const found = await find(pngs[0]!);
      if (!found) {
        t.fail(`${name}: no face found`);
        continue;
      }
      t.ok(found.box.x < 0, `${name}: the detector's box starts left of the frame (${found.box.x.toFixed(1)})`);
      const marked = face.eyes.map(([x, y]) => [x - shift, y]);
      const d = dist(face.eyes[0], face.eyes[1]);
      const e = [dist(found.eyes[0], marked[0]!) / d, dist(found.eyes[1], marked[1]!) / d];
      t.ok(Math.max(...e) <= 0.1, `${name} moved ${shift} px left: eyes within 10 % of the eye distance of the marked points moved with it (${e.map((x) => (x * 100).toFixed(1)).join(' %, ')} %)`);
    }
  });
}
