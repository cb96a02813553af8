import t from 'tap';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ROOT } from '../helpers/server.ts';
import { FACES, captureToolsMissing, dist, facePng, launchWithCamera } from './helpers.ts';

// The capture component's landmark engine in headless Chromium, loaded as an integrator's page
// loads it (capture.js from the fleet example's origin, the engine chunk, models and WASM files
// fetched lazily from there), on every hand-marked photograph of test/capture/faces.json. The
// eye centres it finds are compared with the hand-marked ones: mean error <= 5 % and worst
// <= 10 % of the eye distance (issue 41); the worst bound holds for the frontal faces, the
// only ones the component captures (a turned head is asked to turn to the camera). Also: nothing is fetched before a capture starts,
// nothing from another origin, and the component plus its models stay under 5 MB.
const missing = captureToolsMissing();
if (missing) {
  t.plan(0, missing);
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

  t.test('eye centres against the hand-marked points', async (t) => {
    // the engine finds the centre of each eye opening (the mean of its six 68-point landmarks),
    // which is what the crop should follow: it stays put when the person looks aside. Against
    // the iris centres the errors are printed too: they differ where the person looks away.
    const frontal: number[] = [];
    const all: number[] = [];
    const iris: number[] = [];
    for (const face of FACES) {
      const found = await page.evaluate(async (png) => {
        const bytes = Uint8Array.from(atob(png), (c) => c.charCodeAt(0));
        const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
        const canvas = document.createElement('canvas');
        canvas.width = bitmap.width;
        canvas.height = bitmap.height;
        canvas.getContext('2d', { willReadFrequently: true })!.drawImage(bitmap, 0, 0);
        const engine = (window as unknown as { engine: { find(c: HTMLCanvasElement): Promise<{ eyes: [number, number][] } | null> } }).engine;
        return (await engine.find(canvas))?.eyes ?? null;
      }, facePng(face).toString('base64'));
      if (!found) {
        t.fail(`${face.name}: no face found`);
        continue;
      }
      const d = dist(face.eyes[0], face.eyes[1]);
      const e = [dist(found[0]!, face.eyes[0]) / d, dist(found[1]!, face.eyes[1]) / d];
      const ei = [dist(found[0]!, face.irises[0]) / d, dist(found[1]!, face.irises[1]) / d];
      all.push(...e);
      iris.push(...ei);
      if (face.pose === 'frontal') frontal.push(...e);
      const pct = (v: number[]) => v.map((x) => (x * 100).toFixed(1)).join(' %, ');
      t.comment(`${face.name} (${face.pose}): found ${JSON.stringify(found.map((p) => p.map((v) => +v.toFixed(1))))}, marked ${JSON.stringify(face.eyes)}: ${pct(e)} % of ${d.toFixed(1)} px (from the irises: ${pct(ei)} %)`);
    }
    const mean = (v: number[]) => v.reduce((s, x) => s + x, 0) / v.length;
    t.equal(all.length, FACES.length * 2, 'every face found');
    t.comment(`from the iris centres: mean ${(mean(iris) * 100).toFixed(2)} %, worst ${(Math.max(...iris) * 100).toFixed(2)} %`);
    t.ok(mean(all) <= 0.05, `mean error, all faces: ${(mean(all) * 100).toFixed(2)} % of the eye distance (<= 5 %)`);
    t.ok(mean(frontal) <= 0.05, `mean error, frontal faces: ${(mean(frontal) * 100).toFixed(2)} % (<= 5 %)`);
    t.ok(Math.max(...frontal) <= 0.1, `worst error, frontal faces: ${(Math.max(...frontal) * 100).toFixed(2)} % (<= 10 %)`);
    t.comment(`worst error, all faces (a three-quarter face's far eye included): ${(Math.max(...all) * 100).toFixed(2)} %`);
  });
}
