import t from 'tap';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { eyeCrop320 } from '../../client/src/index.ts';
import { encodePng } from '../../src/images/png-encode.ts';
import { startApi } from '../helpers/api.ts';
import { ROOT, makeToken } from '../helpers/server.ts';
import { chromiumMissing, launchChromium } from '../helpers/browser.ts';
import { missingTool } from '../helpers/required.ts';

// The client package in headless Chromium, from a page on another origin than the service:
// the example capture page (examples/capture, served by its own server, with the package
// bundled by esbuild) picks an image, marks the eyes, crops and verifies; the bundle is also
// driven directly on a canvas; an origin not in CORS_ORIGINS is refused by the browser.
const missing = chromiumMissing('client browser test');
if (missing) {
  missingTool(t, missing);
} else {
  // a browser, two servers and real inference: more than the suite's 240 s default when loaded
  t.setTimeout(480_000);
  const { startExampleServer } = await import(pathToFileURL(path.join(ROOT, 'examples/capture/serve.mjs')).href) as {
    startExampleServer(o?: { port?: number; host?: string }): Promise<{ port: number; url: string; close(): Promise<void> }>;
  };
  const example = await startExampleServer();
  t.teardown(() => example.close());
  // the service's app (and engine) in process on its real store: test/helpers/api.ts (was one server start)
  const server = await startApi({ engine: 'real', ready: true, env: { CORS_ORIGINS: example.url } });
  t.teardown(() => server.stop());
  const browser = await launchChromium();
  t.teardown(() => browser.close());
  // a verify runs real inference: on a loaded 2-core machine it can take longer than
  // Playwright's 30 s default; each wait still ends at the event it waits for
  const newPage = async (options?: Parameters<typeof browser.newPage>[0]) => {
    const page = await browser.newPage(options);
    page.setDefaultTimeout(180_000);
    return page;
  };

  // a 640x480 source: gradients plus a fixed pattern, so every crop pixel is distinct-ish
  const W = 640;
  const H = 480;
  const rgb = new Uint8Array(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const o = (y * W + x) * 3;
      rgb[o] = (x * 255) / W;
      rgb[o + 1] = (y * 255) / H;
      rgb[o + 2] = (x * 7 + y * 13) & 255;
    }
  }
  const png = encodePng(rgb, W, H);
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
  const used = async (token: string) => {
    const me = await (await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).json();
    return me.usage[0].used as number;
  };

  t.test('the example page: pick a file, click the eyes, see the crop, send it, see the verdict', async (t) => {
    const { token } = await makeToken(server, ['rgb_liveness:10:day']);
    const page = await newPage({ viewport: { width: 1280, height: 900 } });
    const problems: string[] = [];
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(`${example.url}/?service=${encodeURIComponent(server.baseUrl)}`);
    await page.fill('#token', token);
    await page.setInputFiles('#file', { name: 'face.png', mimeType: 'image/png', buffer: png });
    await page.waitForFunction(() => (document.getElementById('source') as HTMLCanvasElement).width === 640);
    t.match(await page.textContent('#source-info'), 'face.png: 640 x 480');
    // the right eye clicked first: the page sorts the pair by x, as the service requires
    await page.click('#source', { position: { x: 360, y: 202 } });
    await page.click('#source', { position: { x: 280, y: 200 } });
    await page.waitForSelector('#crop[data-ready=true]');
    t.same(await Promise.all(['#x0', '#y0', '#x1', '#y1'].map((s) => page.inputValue(s))), ['360', '202', '280', '200'], 'clicks land on source pixels');
    t.notOk(await page.isDisabled('#send'));
    await page.click('#send');
    await page.waitForSelector('#verdict:not([data-state=idle]):not([data-state=sending])');
    const state = await page.getAttribute('#verdict', 'data-state');
    t.match(state, /^(live|not_live|retry)$/, `a verdict: ${await page.textContent('#verdict')}`);
    t.match(await page.textContent('#request-id'), /^[0-9a-f-]{36}$/, 'the request id is readable across origins');
    // the crop the browser made is the reference crop of the same pixels
    const expected = sha(eyeCrop320({ data: rgb, width: W, height: H }, [[280, 200], [360, 202]]));
    t.equal(await page.getAttribute('#crop', 'data-sha256'), expected, 'the browser crop equals the Node crop byte for byte');
    t.equal(await used(token), 1, 'one unit charged');
    t.same(problems, []);
    await page.close();
  });

  t.test('the bundle on a canvas: crop, build, verify with retries and a typed outcome', async (t) => {
    const { token } = await makeToken(server, ['rgb_liveness:10:day']);
    const page = await newPage();
    await page.goto(`${example.url}/`);
    const out = await page.evaluate(async ({ baseUrl, token }) => {
      const pkg = await import(`${location.origin}/client.js`);
      const canvas = document.createElement('canvas');
      canvas.width = 400;
      canvas.height = 300;
      const ctx = canvas.getContext('2d')!;
      const grad = ctx.createLinearGradient(0, 0, 400, 300);
      grad.addColorStop(0, '#203040');
      grad.addColorStop(1, '#e0c0a0');
      ctx.fillStyle = grad;
      ctx.fillRect(0, 0, 400, 300);
      const img = ctx.getImageData(0, 0, 400, 300);
      const eyes = [[170, 140], [230, 142]];
      const crop: Uint8Array = pkg.eyeCrop320(img, eyes);
      const built = await pkg.buildCapture({ mode: 'rgb_single', capture_id: 'canvas-1', frames: [{ timestamp_us: 0, source_size: [400, 300], eyes_xy: eyes, image: { bytes: crop } }] });
      const client = pkg.createVerifyClient({ baseUrl, token });
      const first = await client.verify('rgb_liveness', built.metadata, built.files, { idempotencyKey: 'canvas-key-1' });
      const again = await client.verify('rgb_liveness', built.metadata, built.files, { idempotencyKey: 'canvas-key-1' });
      const denied = await pkg.createVerifyClient({ baseUrl, token: 'lvk_wrong' }).verify('rgb_liveness', built.metadata, built.files);
      // base64, not an array of numbers: 480,000 numbers cost seconds of CPU through the
      // protocol (as test/capture/component.test.ts found for a 640x480 frame), a string a moment
      let text = '';
      for (let i = 0; i < img.data.length; i += 0x8000) text += String.fromCharCode(...img.data.subarray(i, i + 0x8000));
      return {
        cropLength: crop.length, pixels: btoa(text), sha: built.metadata.frames[0].image.sha256,
        first: { kind: first.kind, verdict: first.verdicts?.[0]?.verdict, replayed: first.replayed },
        again: { kind: again.kind, replayed: again.replayed },
        denied: { kind: denied.kind, code: denied.code, httpStatus: denied.httpStatus, requestId: denied.requestId },
      };
    }, { baseUrl: server.baseUrl, token });
    t.equal(out.cropLength, 307200);
    const nodeCrop = eyeCrop320({ data: new Uint8ClampedArray(Buffer.from(out.pixels, 'base64')), width: 400, height: 300 }, [[170, 140], [230, 142]]);
    t.equal(out.sha, sha(nodeCrop), 'Web Crypto hash of the browser crop = node:crypto hash of the Node crop');
    t.equal(out.first.kind, 'completed');
    t.match(out.first.verdict, /^(live|not_live|retry)$/);
    t.equal(out.first.replayed, false);
    t.same(out.again, { kind: 'completed', replayed: true }, 'Idempotency-Replayed is exposed to the page');
    t.equal(out.denied.kind, 'error');
    t.equal(out.denied.code, 'invalid_token', 'a 401 is an error with its code, never a verdict');
    t.equal(out.denied.httpStatus, 401);
    t.match(out.denied.requestId, /^[0-9a-f-]{36}$/);
    t.equal(await used(token), 1, 'the replay charged nothing');
    await page.close();
  });

  t.test('a page on an origin not in CORS_ORIGINS cannot call the service', async (t) => {
    const { token } = await makeToken(server, ['rgb_liveness:10:day']);
    const page = await newPage();
    // the same page under another host name is another origin
    await page.goto(`http://localhost:${example.port}/`);
    const out = await page.evaluate(async ({ baseUrl, token }) => {
      const pkg = await import(`${location.origin}/client.js`);
      const built = await pkg.buildCapture({ mode: 'rgb_single', frames: [{ timestamp_us: 0, source_size: [640, 480], eyes_xy: [[280, 200], [360, 202]], image: { bytes: new Uint8Array(307200) } }] });
      const o = await pkg.createVerifyClient({ baseUrl, token, maxAttempts: 1 }).verify('rgb_liveness', built.metadata, built.files);
      return { kind: o.kind, code: o.code };
    }, { baseUrl: server.baseUrl, token });
    t.same(out, { kind: 'error', code: 'network_error' }, 'the browser blocks the preflight');
    t.equal(await used(token), 0, 'nothing reached the service');
    await page.close();
  });
}
