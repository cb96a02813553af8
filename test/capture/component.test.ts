import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import type { Browser, Page, Request } from 'playwright-core';
import { eyeCrop320 } from '../../client/src/index.ts';
import { ROOT, makeToken, startServer, tempDir } from '../helpers/server.ts';
import { FACES, captureToolsMissing, dist, launchWithCamera, writeClip } from './helpers.ts';

// The capture component (capture/) end to end, as a fleet runs it: headless Chromium whose fake
// camera plays a clip made from a hand-marked photograph, the fleet example's backend
// (examples/fleet: mints a session with the business token, serves the page, reads the
// session's result server to server) and the real service. Each mode ends in a 200 and the
// backend's reading; the crop the component uploads is the client package's reference crop of
// the camera's frame; a clip without a face ends in guidance and no call.
const missing = captureToolsMissing();
if (missing) {
  t.plan(0, missing);
} else {
  // a browser per clip, the landmark model and real inference on a loaded 2-core machine
  t.setTimeout(600_000);
  const work = tempDir('lv-capture-');
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const server = await startServer({ ready: true, env: { CORS_ORIGINS: origin } });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:100:day', 'color_liveness:100:day']);
  const { startFleetExample } = await import(pathToFileURL(path.join(ROOT, 'examples/fleet/server.mjs')).href) as {
    startFleetExample(o: { serviceUrl: string; businessToken: string; port?: number }): Promise<{ url: string; componentFiles: Map<string, Buffer>; close(): Promise<void> }>;
  };
  const example = await startFleetExample({ serviceUrl: server.baseUrl, businessToken: token, port });
  t.teardown(() => example.close());
  const face = FACES.find((f) => f.name === 'f2')!;
  const used = async () => {
    const me = await (await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).json() as { usage: { module_id: string; used: number }[] };
    return Object.fromEntries(me.usage.map((u) => [u.module_id, u.used]));
  };

  /** A browser whose camera plays `pattern` of `face`, a page of the example in `mode`. */
  async function open(pattern: string, mode: string, query = '&autostart=1'): Promise<{ browser: Browser; page: Page; verifies: Request[]; problems: string[] }> {
    const clip = path.join(work, `${mode}-${pattern.length}-${Date.now()}.y4m`);
    writeClip(clip, face, pattern);
    const browser = await launchWithCamera(clip);
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } }); // a phone-sized viewport
    page.setDefaultTimeout(240_000);
    const verifies: Request[] = [];
    const problems: string[] = [];
    page.on('request', (r) => {
      if (r.url().includes('/verify')) verifies.push(r);
    });
    page.on('pageerror', (e) => problems.push(e.message));
    await page.goto(`${example.url}/?mode=${mode}${query}`);
    return { browser, page, verifies, problems };
  }
  const outcomeOf = async (page: Page) => {
    await page.waitForSelector('[data-testid=outcome][data-component]');
    return {
      component: await page.getAttribute('[data-testid=outcome]', 'data-component'),
      backend: JSON.parse((await page.textContent('[data-testid=outcome]'))!) as { session_id: string; request_ids: string[]; results: { status: string; alive: boolean | null; reason: string | null; mode: string }[] },
      outcome: await page.evaluate(() => (window as unknown as { liveness: { outcomes: unknown[] } }).liveness.outcomes.at(-1)) as { kind: string; verdict?: string; requestId?: string },
      camera: await page.evaluate(() => (window as unknown as { liveness: { capture: { cameraActive: boolean } } }).liveness.capture.cameraActive),
    };
  };
  /** The multipart body of a verify request: its metadata JSON and its parts by name. */
  const partsOf = (body: Buffer, contentType: string) => {
    const boundary = /boundary=(?:"([^"]+)"|([^;]+))/.exec(contentType)!;
    const sep = Buffer.from(`--${boundary[1] ?? boundary[2]}`);
    const parts = new Map<string, Buffer>();
    let at = body.indexOf(sep);
    while (at >= 0) {
      const next = body.indexOf(sep, at + sep.length);
      if (next < 0) break;
      const chunk = body.subarray(at + sep.length + 2, next - 2);
      const headEnd = chunk.indexOf('\r\n\r\n');
      const name = /name="([^"]+)"/.exec(chunk.subarray(0, headEnd).toString())![1]!;
      parts.set(name, chunk.subarray(headEnd + 4));
      at = next;
    }
    return { metadata: JSON.parse(parts.get('metadata')!.toString()), parts };
  };
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

  t.test('rgb_single: eyes found, the reference crop uploaded, a 200 the backend reads back', async (t) => {
    const before = await used();
    const { browser, page, verifies, problems } = await open('F', 'rgb_single');
    t.teardown(() => browser.close());
    const { component, backend, outcome, camera } = await outcomeOf(page);
    t.equal(component, 'verdict', `the component's outcome: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.equal(verifies.length, 1, 'one verify call');
    t.equal(backend.request_ids.length, 1, 'the backend reads one verification');
    t.equal(backend.request_ids[0], outcome.requestId, 'the one the page made');
    t.equal(backend.results[0]!.status, 'ok');
    t.equal(typeof backend.results[0]!.alive, 'boolean');
    t.equal(camera, false, 'the camera is released');
    t.same((await used()).rgb_liveness! - before.rgb_liveness!, 1, 'one unit charged');

    const req = verifies[0]!;
    const { metadata, parts } = partsOf((await req.postDataBuffer())!, (await req.allHeaders())['content-type']!);
    const frame = metadata.frames[0];
    t.same(frame.source_size, [640, 480]);
    const d = dist(face.eyes[0], face.eyes[1]);
    const err = Math.max(dist(frame.eyes_xy[0], face.eyes[0]), dist(frame.eyes_xy[1], face.eyes[1])) / d;
    t.ok(err <= 0.1, `eyes found within 10 % of the eye distance of the hand-marked points (${(err * 100).toFixed(1)} %)`);
    // the camera plays one still image: any frame of it is the frame the component cropped
    const pixels = await page.evaluate(async () => {
      const stream = await navigator.mediaDevices.getUserMedia({ video: { width: 640, height: 480 } });
      const video = document.createElement('video');
      video.muted = true;
      video.srcObject = stream;
      await video.play();
      await new Promise((r) => (video as HTMLVideoElement & { requestVideoFrameCallback(cb: () => void): void }).requestVideoFrameCallback(r));
      const c = document.createElement('canvas');
      c.width = video.videoWidth;
      c.height = video.videoHeight;
      const ctx = c.getContext('2d', { willReadFrequently: true })!;
      ctx.drawImage(video, 0, 0);
      for (const tr of stream.getTracks()) tr.stop();
      return Array.from(ctx.getImageData(0, 0, c.width, c.height).data);
    });
    const reference = eyeCrop320({ data: new Uint8ClampedArray(pixels), width: 640, height: 480 }, frame.eyes_xy);
    const uploaded = parts.get(frame.image.part)!;
    t.equal(frame.image.encoding, 'rgb8');
    t.ok(Buffer.from(reference).equals(uploaded), 'the uploaded crop equals eyeCrop320 of the camera frame at the packet eyes, byte for byte');
    t.equal(frame.image.sha256, sha(uploaded), 'its sha256 is what the packet says');
    t.same(problems, []);
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
