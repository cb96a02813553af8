// Shared by the capture component's browser tests: the hand-marked faces, Y4M clips made from
// them for Chromium's fake camera, and a Chromium launched with that camera.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import type { Browser, BrowserContext, Page, Request } from 'playwright-core';
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
  /** a test's own view of the photograph: ffmpeg filters after the cut (',rotate=...'), in
   * the clips made of it (faceRgb); none in faces.json */
  filter?: string;
}

export const FACES: Face[] = (JSON.parse(fs.readFileSync(path.join(ROOT, 'test/capture/faces.json'), 'utf8')) as { faces: Face[] }).faces;
export const PHOTOS = path.join(ROOT, 'node_modules/@vladmandic/face-api/demo');

/** Why the camera tests cannot run here, or null. */
export function captureToolsMissing(): string | null {
  if (!fs.existsSync(CHROMIUM)) return `capture browser tests skipped: ${CHROMIUM} not found (apt-get install -y chromium; .ci/run does this as root)`;
  if (spawnSync('ffmpeg', ['-version']).status !== 0) return 'capture browser tests skipped: ffmpeg not found (apt-get install -y ffmpeg; .ci/run does this as root)';
  return null;
}

/** The face's 640x480 frame as RGB bytes, decoded by ffmpeg from the photograph (and its
 * `filter` applied). */
export function faceRgb(face: Face): Buffer {
  const [x, y, w, h] = face.crop;
  const r = spawnSync('ffmpeg', ['-v', 'error', '-i', path.join(PHOTOS, face.photo), '-vf', `crop=${w}:${h}:${x}:${y}${face.filter ?? ''}`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], { maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`ffmpeg: ${r.stderr.toString()}`);
  return r.stdout;
}

/** The face's 640x480 frame as RGB bytes and, for each of `filters` (more ffmpeg filters after
 * the cut: ',hflip' mirrors it; '' is the frame as cut), as a PNG file: one ffmpeg run decodes the photograph once for
 * all of them (a run per frame cost ~135 ms of CPU each, 48 runs in landmarks.test.ts). */
export function faceFrames(face: Face, filters: string[]): { rgb: Buffer; pngs: Buffer[] } {
  const [x, y, w, h] = face.crop;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lv-face-'));
  try {
    const graph = [`[0:v]crop=${w}:${h}:${x}:${y},split=${filters.length + 1}[raw]${filters.map((_, i) => `[s${i}]`).join('')}`,
      ...filters.map((f, i) => `[s${i}]null${f}[p${i}]`)].join(';');
    const outputs = [['-map', '[raw]', '-f', 'rawvideo', '-pix_fmt', 'rgb24', path.join(dir, 'raw.rgb')],
      ...filters.map((_, i) => ['-map', `[p${i}]`, '-frames:v', '1', '-vcodec', 'png', '-pix_fmt', 'rgb24', path.join(dir, `${i}.png`)])].flat();
    const r = spawnSync('ffmpeg', ['-v', 'error', '-i', path.join(PHOTOS, face.photo), '-filter_complex', graph, ...outputs]);
    if (r.status !== 0) throw new Error(`ffmpeg: ${r.stderr.toString()}`);
    return { rgb: fs.readFileSync(path.join(dir, 'raw.rgb')), pngs: filters.map((_, i) => fs.readFileSync(path.join(dir, `${i}.png`))) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** RGB bytes of a 640x480 frame as RGBA image data, as a canvas gives it. */
export function rgbToRgba(rgb: Buffer, width = 640, height = 480): { data: Uint8ClampedArray; width: number; height: number } {
  const data = new Uint8ClampedArray((rgb.length / 3) * 4);
  for (let i = 0, o = 0; i < rgb.length; i += 3, o += 4) {
    data[o] = rgb[i]!;
    data[o + 1] = rgb[i + 1]!;
    data[o + 2] = rgb[i + 2]!;
    data[o + 3] = 255;
  }
  return { data, width, height };
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

/** Chromium with a fake camera that plays `clip` (or none); `deny`: the person refuses
 * camera access (no fake permission prompt, so headless Chromium answers NotAllowedError). */
export async function launchWithCamera(clip?: string, deny = false): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ...(deny ? [] : ['--use-fake-ui-for-media-stream']), '--use-fake-device-for-media-stream',
      ...(clip ? [`--use-file-for-fake-video-capture=${clip}`] : []),
    ],
  });
}

/** Distance between two points. */
export const dist = (a: readonly number[], b: readonly number[]) => Math.hypot(b[0]! - a[0]!, b[1]! - a[1]!);

/** The service (real, CORS open to the example) and the fleet example in front of it, with a
 * business token granted both modules; `open` starts a browser whose camera plays a clip. */
export async function startFleet(t: { teardown(fn: () => unknown): void }, work: string) {
  const net = await import('node:net');
  const { pathToFileURL } = await import('node:url');
  const { makeToken } = await import('../helpers/server.ts');
  const { startApi } = await import('../helpers/api.ts');
  const port = await new Promise<number>((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as import('node:net').AddressInfo;
      s.close(() => resolve(port));
    });
  });
  // the service's app and engine in this process on its real store (test/helpers/api.ts; was a
  // server process): the example reaches it over HTTP as it would a deployed service
  const server = await startApi({ engine: 'real', ready: true, env: { CORS_ORIGINS: `http://127.0.0.1:${port}` } });
  t.teardown(() => server.stop());
  const { token } = await makeToken(server, ['rgb_liveness:100:day', 'color_liveness:100:day']);
  const { startFleetExample } = await import(pathToFileURL(path.join(ROOT, 'examples/fleet/server.mjs')).href) as {
    startFleetExample(o: { serviceUrl: string; businessToken: string; port?: number }): Promise<{ url: string; close(): Promise<void> }>;
  };
  const example = await startFleetExample({ serviceUrl: server.baseUrl, businessToken: token, port });
  t.teardown(() => example.close());
  const used = async () => {
    const me = await (await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${token}` } })).json() as { usage: { module_id: string; used: number }[] };
    return Object.fromEntries(me.usage.map((u) => [u.module_id, u.used])) as Record<string, number>;
  };
  // One browser per camera (clip, frame rate, permission), shared by the tests that use the same
  // one: the camera is fixed when Chromium starts, and each launch cost seconds on a loaded host.
  // Each `open` gets a context of its own (what browser.newPage() made anyway: fresh storage,
  // permissions and routes); the one opened before it on that browser is closed first, so no
  // earlier page keeps running.
  let clips = 0;
  const browsers = new Map<string, { browser: Promise<Browser>; last?: BrowserContext }>();
  /** The shared browser whose camera plays `pattern` of `face` at `fps` (`deny`: access refused). */
  const browserFor = (face: Face, pattern: string, fps = 15, deny = false) => {
    const key = JSON.stringify([face.name, face.filter ?? '', pattern, fps, deny]);
    let entry = browsers.get(key);
    if (!entry) {
      const clip = path.join(work, `clip-${++clips}.y4m`);
      writeClip(clip, face, pattern, fps);
      const browser = launchWithCamera(clip, deny);
      // a launch that failed has nothing to close, and must not reject: tap then skips the
      // teardowns registered before this one (the example's server would hold the file open)
      t.teardown(async () => (await browser.catch(() => undefined))?.close());
      entry = { browser };
      browsers.set(key, entry);
    }
    return entry;
  };
  /** A page whose camera plays `pattern` of `face` at `fps`, on the example page in `mode`;
   * `prepare` runs on the page before it loads (routes, init scripts). */
  const open = async (face: Face, pattern: string, mode: string, query = '&autostart=1', fps = 15, deny = false, prepare?: (page: Page) => Promise<void>) => {
    const entry = browserFor(face, pattern, fps, deny);
    const browser = await entry.browser;
    await entry.last?.close();
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } }); // a phone-sized viewport
    entry.last = context;
    const page = await context.newPage();
    page.setDefaultTimeout(240_000);
    const verifies: Request[] = [];
    const problems: string[] = [];
    page.on('request', (r) => {
      if (r.url().includes('/verify')) verifies.push(r);
    });
    page.on('pageerror', (e) => problems.push(e.message));
    await prepare?.(page);
    await page.goto(`${example.url}/?mode=${mode}${query}`);
    return { browser, page, verifies, problems };
  };
  /** A fresh context on the shared browser of that camera, for a page of the test's own. */
  const contextFor = async (face: Face, pattern: string, fps = 15, deny = false) => {
    const entry = browserFor(face, pattern, fps, deny);
    const browser = await entry.browser;
    await entry.last?.close();
    entry.last = await browser.newContext();
    return entry.last;
  };
  return { server, example, token, used, open, contextFor };
}

export interface BackendReading {
  session_id: string;
  state: string;
  request_ids: string[];
  /** the example's decision (docs/sessions.md): a completed last call whose records are all ok */
  decided: boolean;
  live: boolean;
  calls: { request_id: string; status: string }[];
  results: { capture_id: string; status: string; alive: boolean | null; reason: string | null; mode: string; reset_events: { source_index: number; reason: string }[] }[];
}

/** Waits for the example page's outcome element and reads it, with the component's outcome. */
export async function outcomeOf(page: Page) {
  await page.waitForSelector('[data-testid=outcome][data-component]');
  return {
    component: await page.getAttribute('[data-testid=outcome]', 'data-component'),
    backend: JSON.parse((await page.textContent('[data-testid=outcome]'))!) as BackendReading,
    outcome: await page.evaluate(() => (window as unknown as { liveness: { outcomes: unknown[] } }).liveness.outcomes.at(-1)) as { kind: string; verdict?: string; reason?: string; requestId?: string; code?: string },
    camera: await page.evaluate(() => (window as unknown as { liveness: { capture: { cameraActive: boolean } } }).liveness.capture.cameraActive),
    guidance: await page.textContent('[data-testid=guidance]'),
  };
}

/** The multipart body of a verify request: its metadata JSON and its parts by name. */
export async function partsOf(req: Request) {
  const body = req.postDataBuffer()!;
  const contentType = (await req.allHeaders())['content-type']!;
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
  return { metadata: JSON.parse(parts.get('metadata')!.toString()) as any, parts };
}

/** Saves what the page shows now as .tap/screenshots/NAME.png, for a person to look at (the
 * states a test reaches are seen, not only asserted). */
export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync('.tap/screenshots', { recursive: true });
  await page.screenshot({ path: `.tap/screenshots/${name}.png`, fullPage: true });
}
