import t from 'tap';
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import type { Page } from 'playwright-core';
import { LIMITS, eyeCrop320 } from '../../client/src/index.ts';
import { TEXTS } from '../../capture/src/guidance.ts';
import { tempDir } from '../helpers/server.ts';
import { FACES, captureToolsMissing, dist, outcomeOf, partsOf, screenshot, startFleet } from './helpers.ts';
import { missingTool } from '../helpers/required.ts';

// The capture component (capture/) end to end, as a fleet runs it: headless Chromium whose fake
// camera plays a clip made from a hand-marked photograph, the fleet example's backend
// (examples/fleet: mints a session with the business token, serves the page, reads the
// session's result server to server) and the real service. rgb_single and rgb_sequence here;
// colour, the photosensitivity opt-out and the face-less clip in modes.test.ts.
const missing = captureToolsMissing();
if (missing) {
  missingTool(t, missing);
} else {
  // a browser per clip, the landmark model and real inference on a loaded 2-core machine
  t.setTimeout(600_000);
  const work = tempDir('lv-capture-');
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const { used, open, server, example } = await startFleet(t, work);
  const face = FACES.find((f) => f.name === 'f2')!;
  const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
  /** Records, before the page loads, the captureTime Chromium gives each camera frame the
   * page's requestVideoFrameCallback callbacks receive, by frame counter (presentedFrames), in
   * window.cameraFrames; a browser that gives none gets the presentationTime, negated (the
   * component's own fallback, capture/src/frames.ts). (A string: tsx would wrap a function's
   * inner functions in a helper the page does not have.) */
  const recordCameraFrames = async (page: Page): Promise<void> => {
    await page.addInitScript(`{
    const seen = new Map();
    window.cameraFrames = seen;
    const request = HTMLVideoElement.prototype.requestVideoFrameCallback;
    HTMLVideoElement.prototype.requestVideoFrameCallback = function (cb) {
      return request.call(this, (now, meta) => {
        seen.set(meta.presentedFrames, meta.captureTime > 0 ? meta.captureTime : -meta.presentationTime);
        cb(now, meta);
      });
    };
  }`);
  };

  t.test('rgb_single: eyes found, the reference crop uploaded, a 200 the backend reads back', async (t) => {
    const before = await used();
    const { page, verifies, problems } = await open(face, 'F', 'rgb_single');
    const { component, backend, outcome, camera } = await outcomeOf(page);
    t.equal(component, 'verdict', `the component's outcome: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.equal(verifies.length, 1, 'one verify call');
    t.equal(backend.request_ids.length, 1, 'the backend reads one verification');
    t.equal(backend.request_ids[0], outcome.requestId, 'the one the page made');
    t.equal(backend.results[0]!.status, 'ok');
    t.equal(typeof backend.results[0]!.alive, 'boolean');
    t.same(backend.calls, [{ request_id: outcome.requestId, status: 'completed' }], 'each call with its status');
    t.same([backend.decided, backend.live], [true, backend.results[0]!.alive === true], 'the backend decides from status and alive');
    const sessionToken = await page.evaluate(() => (JSON.parse(document.getElementById('config')!.textContent!) as { sessionToken: string }).sessionToken);
    const me = await fetch(`${server.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${sessionToken}` } });
    t.equal(me.status, 401, 'a verdict ends the visit: the session is revoked');
    t.equal(backend.state, 'revoked', 'and the reading says so (it showed "active", read before the revocation)');
    // a mode the example does not know falls back to rgb_single, Object.prototype's names too
    // (?mode=toString passed as known, and the mint failed 422)
    for (const mode of ['toString', '__proto__', 'nope']) t.equal((await fetch(`${example.url}/?mode=${mode}`)).status, 200, `?mode=${mode}`);
    t.equal(camera, false, 'the camera is released');
    t.equal((await used()).rgb_liveness! - before.rgb_liveness!, 1, 'one unit charged');

    const { metadata, parts } = await partsOf(verifies[0]!);
    const frame = metadata.frames[0];
    t.same(frame.source_size, [640, 480]);
    const d = dist(face.eyes[0], face.eyes[1]);
    const err = Math.max(dist(frame.eyes_xy[0], face.eyes[0]), dist(frame.eyes_xy[1], face.eyes[1])) / d;
    t.ok(err <= 0.1, `eyes found within 10 % of the eye distance of the hand-marked points, through the camera (${(err * 100).toFixed(1)} %)`);
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
      // base64, not an array of numbers: the 1.2 million numbers of a 640x480 RGBA frame took
      // ~9 s to come back through the protocol (50 s on a loaded host), this string a moment
      const data = ctx.getImageData(0, 0, c.width, c.height).data;
      let text = '';
      for (let i = 0; i < data.length; i += 0x8000) text += String.fromCharCode(...data.subarray(i, i + 0x8000));
      return btoa(text);
    });
    const reference = eyeCrop320({ data: new Uint8ClampedArray(Buffer.from(pixels, 'base64')), width: 640, height: 480 }, frame.eyes_xy);
    const uploaded = parts.get(frame.image.part)!;
    t.equal(frame.image.encoding, 'rgb8');
    t.ok(Buffer.from(reference).equals(uploaded), 'the uploaded crop equals eyeCrop320 of the camera frame at the packet eyes, byte for byte');
    t.equal(frame.image.sha256, sha(uploaded), 'its sha256 is what the packet says');
    t.same(problems, []);
  });

  t.test('rgb_sequence: face-less frames in the middle travel as face_unavailable events, never renumbered', async (t) => {
    const before = await used();
    // the clip loops at 5 frames a second: eight frames with the face, two without. Three
    // steady frames in a row open the capture at the clip's third face frame or later, even
    // when a busy host analyses only every third frame, so the eight frames from there
    // always reach the face-less pair, and the capture goes on to a face after it
    const { page, verifies, problems } = await open(face, 'FFFFFFFF..', 'rgb_sequence', '&autostart=1', 5, false, recordCameraFrames);
    const { component, backend, outcome, camera } = await outcomeOf(page);
    t.match(component, /^(verdict|retry)$/, `a verdict from the service: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.equal(verifies.length, 1, 'one verify call');
    t.equal(backend.request_ids[0], outcome.requestId);
    t.equal(backend.results[0]!.mode, 'rgb_sequence');
    t.equal(camera, false, 'the camera is released');
    t.equal((await used()).rgb_liveness! - before.rgb_liveness!, 1, 'one unit charged');
    const { metadata, parts } = await partsOf(verifies[0]!);
    const frames = metadata.frames as { source_index: number; timestamp_us: number; status: string; eyes_xy?: number[][]; image?: { part: string; sha256: string } }[];
    t.comment(frames.map((f) => `${f.source_index}@${f.timestamp_us}:${f.status}`).join(' '));
    const statuses = frames.map((f) => f.status);
    t.equal(statuses[0], 'ok', 'opens on the steady face');
    t.equal(statuses.at(-1), 'ok', 'ends on a frame with a face (a failed last frame would be a retry)');
    const missingFace = frames.slice(1, -1).filter((f) => f.status === 'face_unavailable');
    t.ok(missingFace.length >= 1, `the face-less frames are in the middle as face_unavailable events (${missingFace.length})`);
    for (const f of missingFace) t.notOk('image' in f || 'eyes_xy' in f, 'an event carries no image data');
    t.ok(frames.every((f, i) => i === 0 || (f.source_index > frames[i - 1]!.source_index && f.timestamp_us > frames[i - 1]!.timestamp_us)), 'indices and times strictly increase');
    // the times are the camera's: each frame's timestamp_us is its captureTime, as the page's
    // frame callbacks received it, less the opening frame's, in µs; its source_index is its
    // frame counter less the opening frame's. Checked exactly against what Chromium delivered,
    // not against the clip's nominal 200 ms a frame: a starved host delivers the fake camera's
    // frames late and unevenly (steps of 196, 204, 382, 21 ms were seen), and that is the
    // camera's timing, which the packet must carry as it is.
    const recorded = new Map(await page.evaluate(() => [...(window as unknown as { cameraFrames: Map<number, number> }).cameraFrames]));
    const delivered = frames.filter((f) => f.status !== 'dropped');
    t.ok(recorded.size >= delivered.length, `the page's frame callbacks saw ${recorded.size} frames`);
    t.comment([...recorded.values()].every((v) => v > 0) ? 'Chromium gave every frame its captureTime' : 'frames without captureTime: their presentationTime stands in, as in the component');
    const seen = new Map([...recorded].map(([c, v]) => [c, Math.abs(v)]));
    const steps = frames.slice(1).map((f, i) => (f.timestamp_us - frames[i]!.timestamp_us) / (f.source_index - frames[i]!.source_index));
    t.comment(`ms a frame: ${steps.map((s) => Math.round(s / 1000)).join(', ')}`);
    const opening = [...seen.keys()].filter((c) => delivered.every((f) => {
      const time = seen.get(c + f.source_index);
      return typeof time === 'number' && Math.abs(f.timestamp_us - Math.round((time - seen.get(c)!) * 1000)) <= 1;
    }));
    // (a camera whose frames come exactly 200 ms apart fits more than one opening counter)
    t.ok(opening.length > 0, `every frame's index and time are its camera counter and captureTime from the opening frame's (${delivered.map((f) => `${f.source_index}@${f.timestamp_us}`).join(' ')}; camera: ${[...seen].map(([c, time]) => `${c}@${time}`).join(' ')})`);
    const ok = frames.filter((f) => f.status === 'ok');
    for (const f of ok) t.equal(f.image!.sha256, sha(parts.get(f.image!.part)!), `frame ${f.source_index}: the hash is the part's`);
    t.same(problems, []);
  });
  t.test('rgb_sequence on a page that freezes while recording: the missed frames beyond the 128-event cap are left out, and the capture is still answered', async (t) => {
    const before = await used();
    // Once the component says "capturing" (it then records its frames, each in a frame
    // callback), the page's main thread is blocked for 3.5 s after each callback until the
    // camera counter has run 200 frames past the first one: the frames shown meanwhile are never
    // seen by the page, so the recording has gaps of ~50 frames each at 15 frames a second
    // (fewer on a starved host, hence the counter, not a fixed count of freezes). Each freeze
    // stays under the recording's 5 s stall bound (a camera that delivers nothing is
    // camera_unavailable, capture/src/frames.ts `record`). The component must report
    // them as dropped only as far as the capture's LIMITS.eventsPerCapture allows (413 past it)
    // and leave the rest to the gap in source_index (capture/src/index.ts addDropped).
    const freeze = async (page: Page) => {
      await page.addInitScript(`{
      let first = null;
      window.frozenMs = 0;
      const request = HTMLVideoElement.prototype.requestVideoFrameCallback;
      HTMLVideoElement.prototype.requestVideoFrameCallback = function (cb) {
        return request.call(this, (now, meta) => {
          cb(now, meta);
          if (document.querySelector('.lvc')?.dataset.guidance !== 'capturing') return;
          first ??= meta.presentedFrames;
          if (meta.presentedFrames - first >= 200) return;
          const until = performance.now() + 3500;
          while (performance.now() < until) { /* the slow page */ }
          window.frozenMs += 3500;
        });
      };
    }`);
    };
    const { page, verifies, problems } = await open(face, 'F', 'rgb_sequence', '&autostart=1', 15, false, freeze);
    const { component, backend, outcome } = await outcomeOf(page);
    t.comment(`frozen for ${await page.evaluate(() => (window as unknown as { frozenMs: number }).frozenMs)} ms`);
    t.match(component, /^(verdict|retry)$/, `answered by the service, not refused: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.equal(verifies.length, 1, 'one verify call');
    t.equal((await used()).rgb_liveness! - before.rgb_liveness!, 1, 'one unit charged');
    const { metadata } = await partsOf(verifies[0]!);
    const frames = metadata.frames as { source_index: number; status: string }[];
    t.comment(frames.map((f) => `${f.source_index}:${f.status}`).join(' ').slice(0, 2000));
    t.equal(frames.length, LIMITS.eventsPerCapture, `exactly the cap of events (${frames.length})`);
    t.equal(frames[0]!.status, 'ok', 'opens on the steady face');
    t.equal(frames.at(-1)!.status, 'ok', 'closes on the frame after the gap that was cut, with room left for it');
    t.ok(frames.some((f) => f.status === 'dropped'), 'the missed frames it could hold are dropped events');
    t.ok(frames.every((f, i) => i === 0 || f.source_index > frames[i - 1]!.source_index), 'indices strictly increase');
    const jumps = frames.slice(1).filter((f, i) => f.source_index - frames[i]!.source_index > 1);
    t.ok(jumps.length >= 1, 'the frames left out show as a gap in source_index, never renumbered');
    t.equal(backend.results[0]!.mode, 'rgb_sequence');
    t.ok(backend.results[0]!.reset_events.some((r) => r.reason === 'missing_index'), `the service reads the gap as missing frames: ${JSON.stringify(backend.results[0]!.reset_events).slice(0, 300)}`);
    t.same(problems, []);
  });
  t.test('the landmark models fail to load: ended with engine_failed, the camera never opened, nothing sent', async (t) => {
    const before = await used();
    let asked = 0;
    const { page, verifies, problems } = await open(face, 'F', 'rgb_single', '&autostart=1', 15, false, async (page) => {
      // the integrator's origin answers 404 for the model files (a deploy that forgot them)
      await page.route('**/models/**', (route) => {
        asked++;
        return route.fulfill({ status: 404, body: 'not found' });
      });
      // getUserMedia counted: the camera must not open for a capture that cannot analyse it
      await page.addInitScript(`{
      window.cameraAsked = 0;
      const get = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
      navigator.mediaDevices.getUserMedia = (c) => { window.cameraAsked++; return get(c); };
    }`);
    });
    const { outcome, camera } = await outcomeOf(page);
    t.match(outcome, { kind: 'ended', reason: 'engine_failed' }, JSON.stringify(outcome).slice(0, 300));
    t.ok(asked >= 1, `the model files were asked for (${asked})`);
    t.equal(await page.evaluate(() => (window as unknown as { cameraAsked: number }).cameraAsked), 0, 'the camera was never asked for');
    t.equal(camera, false);
    t.equal(verifies.length, 0, 'no verify call');
    t.same(await used(), before, 'nothing charged');
    t.same(problems, []);
  });

  t.test('the landmark engine fails on a frame: ended with engine_failed, the camera released, nothing sent; Start again works', async (t) => {
    const before = await used();
    // TensorFlow.js's WASM backend breaks after it has loaded: every kernel of its module
    // (the exports named like TF.js kernels, FusedConv2D, ResizeBilinear...) throws once the
    // component guides, i.e. with the models loaded and the camera open, until the test lifts
    // the fault. The component's own frame reads and crops use no WASM, so what fails is the
    // engine alone (this ended camera_unavailable before the EngineFailure wrap; then, since
    // face-api's tasks dropped the failure, the capture waited for ever with the camera open,
    // capture/src/engine.ts find). The module is wrapped as it is instantiated (Emscripten
    // keeps the exports object it is given). getUserMedia is recorded, for the tracks' state.
    // (A string: tsx would wrap a function's inner functions in a helper the page does not have.)
    const fault = async (page: Page) => {
      await page.addInitScript(`{
      const fault = { arm: true, armed: false, thrown: 0 };
      window.engineFault = fault;
      const wrap = (instance) => {
        const exports = {};
        for (const [name, value] of Object.entries(instance.exports)) {
          exports[name] = typeof value === 'function' && /^[A-Z]/.test(name) ? function (...args) {
            if (fault.armed) {
              fault.thrown++;
              throw new WebAssembly.RuntimeError('injected kernel fault in ' + name);
            }
            return value.apply(this, args);
          } : value;
        }
        return { exports };
      };
      const instantiate = WebAssembly.instantiate;
      WebAssembly.instantiate = async (source, imports) => {
        const made = await instantiate(source, imports);
        return made instanceof WebAssembly.Instance ? wrap(made) : { module: made.module, instance: wrap(made.instance) };
      };
      const streaming = WebAssembly.instantiateStreaming;
      WebAssembly.instantiateStreaming = async (source, imports) => {
        const made = await streaming(source, imports);
        return { module: made.module, instance: wrap(made.instance) };
      };
      new MutationObserver(() => {
        if (fault.arm && document.querySelector('.lvc')?.dataset.guidance === 'no_face') {
          fault.arm = false;
          fault.armed = true;
        }
      }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-guidance'] });
      window.cameraStreams = [];
      const get = navigator.mediaDevices.getUserMedia.bind(navigator.mediaDevices);
      navigator.mediaDevices.getUserMedia = async (c) => {
        const stream = await get(c);
        window.cameraStreams.push(stream);
        return stream;
      };
    }`);
    };
    type Faulty = { engineFault: { armed: boolean; thrown: number }; cameraStreams: MediaStream[]; liveness: { outcomes: unknown[]; busy?: boolean } };
    const { page, verifies, problems } = await open(face, 'F', 'rgb_single', '&autostart=1', 15, false, fault);
    const { component, backend, outcome, camera, guidance } = await outcomeOf(page);
    await screenshot(page, 'capture-engine-failed');
    t.equal(component, 'ended');
    t.match(outcome, { kind: 'ended', reason: 'engine_failed' }, `the engine's failure, not the camera's: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.match((outcome as { message?: string }).message, `${TEXTS.failed} (injected kernel fault in `, 'the message gives the cause');
    t.ok(await page.evaluate(() => (window as unknown as Faulty).engineFault.thrown) >= 1, 'the fault was met in the engine');
    t.equal(guidance, TEXTS.failed, 'the page says the check could not be completed');
    t.equal(camera, false, 'the component reports the camera closed');
    t.same(await page.evaluate(() => (window as unknown as Faulty).cameraStreams.map((s) => s.getTracks().map((tr) => tr.readyState))), [['ended']],
      'the camera was opened once and its track is stopped');
    t.equal(await page.evaluate(() => (document.querySelector('.lvc video') as HTMLVideoElement).srcObject), null, 'the preview holds no stream');
    t.equal(await page.isVisible('[data-action=start]'), true, 'Start is offered again');
    t.equal(await page.textContent('[data-action=start]'), 'Start again');
    t.equal(await page.isVisible('[data-action=cancel]'), false, 'Cancel is gone');
    t.equal(verifies.length, 0, 'no verify call');
    t.same(backend.request_ids, [], 'the backend reads no verification');
    t.same(await used(), before, 'nothing charged');

    // the fault lifted, Start again runs on the same engine (loaded once per page) to a verdict
    await page.evaluate(() => {
      (window as unknown as Faulty).engineFault.armed = false;
    });
    await page.click('[data-action=start]');
    await page.waitForFunction(() => (window as unknown as Faulty).liveness.outcomes.length === 2 && !(window as unknown as Faulty).liveness.busy);
    const again = await outcomeOf(page);
    await screenshot(page, 'capture-engine-failed-then-verdict');
    t.equal(again.component, 'verdict', `the second start reaches a verdict: ${JSON.stringify(again.outcome).slice(0, 300)}`);
    t.equal(verifies.length, 1, 'one verify call, from the second start');
    t.same(again.backend.request_ids, [again.outcome.requestId]);
    t.equal(again.camera, false, 'the camera is released');
    t.same(await page.evaluate(() => (window as unknown as Faulty).cameraStreams.map((s) => s.getTracks().map((tr) => tr.readyState))), [['ended'], ['ended']]);
    t.equal((await used()).rgb_liveness! - before.rgb_liveness!, 1, 'one unit charged, for the verdict');
    t.same(problems, []);
  });
}
