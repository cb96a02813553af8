import t, { type Test } from 'tap';
import fs from 'node:fs';
import type { Page, Route } from 'playwright-core';
import { TEXTS } from '../../capture/src/guidance.ts';
import { tempDir } from '../helpers/server.ts';
import { FACES, captureToolsMissing, outcomeOf, partsOf, screenshot, startFleet } from './helpers.ts';
import { missingTool } from '../helpers/required.ts';

// The capture component's colour mode, its photosensitivity opt-out, a camera that never
// shows a face, a face turned aside, a head rolled on its side, and cancelling, through the fleet example, a fake camera and the real service (see
// component.test.ts for the set-up). The service's own 422 rules judge the colour capture's
// phases and display times: a 200 means they held. Tests with the same camera share its
// browser, each in a context of its own (helpers.ts startFleet); the two that wait for the
// component to give up on a face do so with a shorter faceTimeoutMs (faceTimeout below).
const missing = captureToolsMissing();
if (missing) {
  missingTool(t, missing);
} else {
  t.setTimeout(600_000);
  const work = tempDir('lv-capture-modes-');
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }));
  const { used, open, example, contextFor } = await startFleet(t, work);
  const face = FACES.find((f) => f.name === 'f2')!;
  /** Records every guidance the component shows (its root's data-guidance), from page load.
   * Several changes in one task come as one batch: each record's old value is the one before
   * it, the element's value now the last. (A string: tsx would wrap a function's inner
   * functions in a helper the page does not have.) */
  const recordGuidance = async (page: Page): Promise<void> => {
    await page.addInitScript(`{
      const seen = [];
      window.guidanceSeen = seen;
      const add = (g) => { if (g && seen.at(-1) !== g) seen.push(g); };
      new MutationObserver((records) => {
        for (const r of records) add(r.oldValue);
        add(records.at(-1)?.target.dataset.guidance);
      }).observe(document, { subtree: true, attributes: true, attributeOldValue: true, attributeFilter: ['data-guidance'] });
    }`);
  };
  const guidanceSeen = (page: Page) => page.evaluate(() => (window as unknown as { guidanceSeen: string[] }).guidanceSeen);
  /** The example page with the component mounted with `faceTimeoutMs: ms`. The tests of a
   * capture that never finds a usable face wait for the component to give up, and the example
   * passes no faceTimeoutMs, so each waited the default 30 s (capture/README.md) in full: 70 of
   * the file's 149 s on a loaded host (36 + 34 s; 15 + 14 s at 8 s). Its capture.js is
   * answered, in this page only, by a module that re-exports the shipped one (fetched by
   * another URL, so the real file is the one that runs and finds its assets beside it) with
   * mountCapture given the option; the example's page and backend are otherwise the same. The
   * default itself is not waited for here: the keyboard-cancel test, on the default, cancels
   * well within it. */
  const faceTimeout = (ms: number) => async (page: Page): Promise<void> => {
    await page.route(/\/capture\/capture\.js$/, (route) => route.fulfill({
      contentType: 'text/javascript; charset=utf-8',
      body: `import { mountCapture as mount } from './capture.js?as-shipped';
export * from './capture.js?as-shipped';
export const mountCapture = (root, options) => mount(root, { ...options, faceTimeoutMs: ${ms} });
`,
    }));
  };
  // Short: each clip is one frame looped (a grey frame, the turned face), and the detector is
  // deterministic, so a second analysed frame judges what the first did; what the tests need is
  // one judged frame, and the component always judges one: its guidance loop reads the clock
  // before waiting for each frame, and the deadline is set just before the first wait, so the
  // first frame is analysed and its guidance shown on any load. A gate that let the turned face
  // through shows 'hold_still' from that first frame (the test below fails on it). At 8 s the
  // detector ran flat out in Chromium for the whole wait, twice (~16 CPU-s of the file).
  const FACE_TIMEOUT_MS = 1500;

  t.test('color: a warning first, then white, red, green, blue, each timed before its frame; a 200', async (t) => {
    const before = await used();
    const { page, verifies, problems } = await open(face, 'F', 'color');
    // the warning comes before anything flashes and before the camera opens, with the focus on it
    await page.waitForSelector('.lvc-warning:not([hidden])');
    // the warning is on screen once (its box, not also the status line), and a screen reader
    // finds it as the name of the alert dialog that holds the focus
    const shownText = await page.evaluate(() => document.body.innerText);
    t.equal(shownText.split(/\s+/).join(' ').split('flash white, red, green and blue').length - 1, 1, 'the warning text is shown once');
    t.equal(await page.textContent('[data-testid=guidance]'), '', 'the status line does not repeat it');
    t.equal(await page.getByRole('alertdialog', { name: TEXTS.flash_warning }).count(), 1, 'the alert dialog is named by the warning');
    t.equal(await page.evaluate(() => document.activeElement?.closest('[role=alertdialog]') !== null), true, 'the focus is inside the dialog');
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Continue', 'the keyboard focus is on Continue');
    t.equal(await page.evaluate(() => (window as unknown as { liveness: { capture: { cameraActive: boolean } } }).liveness.capture.cameraActive), false, 'no camera yet');
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { flashes: string[] }).flashes = seen;
      new MutationObserver((records) => {
        for (const r of records) {
          const el = r.target as HTMLElement;
          if (el.classList?.contains('lvc-flash') && el.style.background) seen.push(el.style.background);
        }
      }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ['style'] });
    });
    await page.keyboard.press('Enter');
    const { component, backend, outcome, camera } = await outcomeOf(page);
    t.match(component, /^(verdict|retry)$/, `the service answered: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.equal(verifies.length, 1, 'one verify call');
    t.equal(backend.request_ids[0], outcome.requestId);
    t.equal(backend.results[0]!.mode, 'color');
    t.equal(camera, false, 'the camera is released');
    t.equal(await page.locator('.lvc-flash').count(), 0, 'the colour overlay is gone');
    t.same(await page.evaluate(() => (window as unknown as { flashes: string[] }).flashes),
      ['rgb(255, 255, 255)', 'rgb(255, 0, 0)', 'rgb(0, 255, 0)', 'rgb(0, 0, 255)'], 'the screen showed white, red, green, blue in that order');
    t.equal((await used()).color_liveness! - before.color_liveness!, 1, 'one unit charged');
    const { metadata } = await partsOf(verifies[0]!);
    const frames = metadata.frames as { timestamp_us: number; phase: string; display_time_us: number; status: string }[];
    t.comment(frames.map((f) => `${f.phase}: shown ${f.display_time_us}, exposed ${f.timestamp_us} (${f.status})`).join('; '));
    t.same(frames.map((f) => f.phase), ['white', 'red', 'green', 'blue']);
    frames.forEach((f, i) => {
      t.ok(f.display_time_us <= f.timestamp_us, `${f.phase}: shown no later than its frame's exposure`);
      if (i > 0) t.ok(f.display_time_us > frames[i - 1]!.timestamp_us, `${f.phase}: shown after the previous phase's exposure`);
    });
    t.same(problems, []);
  });

  t.test('color: skipping the flashing check ends without camera, call or charge', async (t) => {
    const before = await used();
    const { page, verifies } = await open(face, 'F', 'color');
    await page.waitForSelector('.lvc-warning:not([hidden])');
    t.same(await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]), [390, 390], 'fits a phone-sized viewport: no sideways scrolling');
    t.equal(await page.isVisible('[data-testid=outcome]'), false, 'no result box before a capture has ended');
    t.equal(await page.getByRole('heading', { name: 'Result from the backend' }).isVisible(), false, 'nor its heading');
    await page.keyboard.press('Tab'); // from Continue to "Skip this check"
    t.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip this check');
    await page.keyboard.press('Enter');
    const { component, backend, outcome, camera } = await outcomeOf(page);
    t.equal(component, 'ended');
    t.equal(outcome.reason, 'flash_opt_out');
    t.equal(camera, false);
    t.equal(await page.getByRole('heading', { name: 'Result from the backend' }).isVisible(), true, 'the result box shows once there is a reading');
    t.equal(verifies.length, 0, 'no call');
    t.same(backend.request_ids, [], 'the backend reads no verification');
    t.same(await used(), before, 'nothing charged');
  });

  t.test('color: Cancel while the warning shows is a cancel, not a skip', async (t) => {
    const before = await used();
    const { page, verifies } = await open(face, 'F', 'color');
    await page.waitForSelector('.lvc-warning:not([hidden])');
    await page.keyboard.press('Escape');
    const { component, outcome, camera } = await outcomeOf(page);
    t.equal(component, 'ended');
    t.equal(outcome.reason, 'cancelled', 'it was flash_opt_out: the person did not choose to skip the check');
    t.equal(camera, false);
    t.equal(verifies.length, 0, 'no call');
    t.same(await used(), before, 'nothing charged');
  });

  t.test('a camera without a face: the guidance says so and nothing is sent', async (t) => {
    const before = await used();
    const { page, verifies } = await open(face, '.', 'rgb_single', '&autostart=1', 15, false, faceTimeout(FACE_TIMEOUT_MS));
    const { component, backend, outcome, camera, guidance } = await outcomeOf(page);
    t.equal(component, 'ended');
    t.equal(outcome.reason, 'no_face');
    t.equal(guidance, 'No face found. Look straight at the camera.', 'the last guidance stays on screen');
    t.equal(await page.getAttribute('[data-testid=guidance]', 'role'), 'status', 'announced to screen readers');
    t.equal(camera, false, 'the camera is released');
    t.equal(verifies.length, 0, 'no call');
    t.same(backend.request_ids, []);
    t.same(await used(), before, 'nothing charged');
  });

  t.test('Cancel from the keyboard while guiding: the camera is released, nothing is sent', async (t) => {
    const before = await used();
    const { page, verifies } = await open(face, '.', 'rgb_single');
    await page.waitForSelector('.lvc[data-guidance=no_face]');
    t.equal(await page.evaluate(() => (window as unknown as { liveness: { capture: { cameraActive: boolean } } }).liveness.capture.cameraActive), true, 'the camera is on while guiding');
    await page.focus('[data-action=cancel]');
    await page.keyboard.press('Enter');
    const { component, outcome, camera, guidance } = await outcomeOf(page);
    t.equal(component, 'ended');
    t.equal(outcome.reason, 'cancelled');
    t.equal(guidance, 'Cancelled.');
    t.equal(camera, false, 'the camera is released');
    t.equal(await page.evaluate(() => (document.querySelector('.lvc video') as HTMLVideoElement).srcObject), null, 'the preview holds no stream');
    t.equal(verifies.length, 0, 'no call');
    t.same(await used(), before, 'nothing charged');
  });

  t.test('camera access refused: the page says how to allow it, nothing is sent', async (t) => {
    const before = await used();
    const { page, verifies } = await open(face, 'F', 'rgb_single', '&autostart=1', 15, true);
    const { component, outcome, camera, guidance } = await outcomeOf(page);
    t.equal(component, 'ended');
    t.equal(outcome.reason, 'camera_denied');
    t.match(guidance, /camera is blocked/);
    t.equal(camera, false);
    t.equal(verifies.length, 0, 'no call');
    t.same(await used(), before, 'nothing charged');
  });

  /** A face the component must only advise on (`advice`, its guidance key), never capture: the
   * face timeout ends it, nothing sent, nothing charged. The last state is saved as a picture. */
  const advisedOnly = async (t: Test, face: (typeof FACES)[number], advice: 'turn_to_camera' | 'straighten_head', what: string) => {
    const before = await used();
    const { page, verifies, problems } = await open(face, 'F', 'rgb_single', '&autostart=1', 15, false, async (page) => {
      await faceTimeout(FACE_TIMEOUT_MS)(page);
      await recordGuidance(page);
    });
    const { component, backend, outcome, camera, guidance } = await outcomeOf(page);
    const seen = await guidanceSeen(page);
    t.comment(`guidance shown: ${seen.join(' > ')}`);
    await screenshot(page, `capture-${advice}`);
    t.equal(component, 'ended');
    t.equal(outcome.reason, 'no_face', 'no face fit for a capture within the time allowed');
    t.equal(guidance, TEXTS[advice], `the last guidance asks ${what}`);
    t.ok(seen.includes(advice), `the guidance ${advice} was shown`);
    t.same(seen.filter((g) => !['loading', 'starting_camera', 'no_face', advice].includes(g)), [],
      'no other guidance: the face was never a good frame (no hold still, no capturing)');
    t.equal(camera, false, 'the camera is released');
    t.equal(verifies.length, 0, 'no call');
    t.same(backend.request_ids, []);
    t.same(await used(), before, 'nothing charged');
    t.same(problems, []);
  };

  t.test('a face turned three-quarters aside: asked to turn to the camera, never captured, nothing sent', async (t) => {
    await advisedOnly(t, FACES.find((f) => f.pose === 'three_quarter')!, 'turn_to_camera', 'to turn to the camera');
  });

  t.test('a head rolled past 45 degrees: asked to hold it upright, never captured, nothing sent', async (t) => {
    // f4's eyes are 4 degrees off level (faces.json); the clip turns the whole picture 42 degrees
    // further, so the eyes are 46 degrees off, more one above the other than side by side: the
    // service would refuse them, and the component asks for the head upright. (Turned 38 to 45
    // degrees, through 4:2:0 as the camera delivers it, the detector still finds the face
    // (scores 0.66 to 0.70) and the eyes read 48 to 61 degrees off level: 42 has room either side.)
    const upright = FACES.find((f) => f.name === 'f4')!;
    await advisedOnly(t, { ...upright, name: 'f4-rolled', filter: ',rotate=-42*PI/180:fillcolor=gray' }, 'straighten_head', 'to hold the head upright');
  });

  t.test('Cancel during the upload: ended with cancelled, not a refusal', async (t) => {
    const before = await used();
    // the verify call is held in the browser (it never reaches the service) until the
    // person has cancelled; the preflight goes through
    let held!: (r: Route) => void;
    const heldRoute = new Promise<Route>((resolve) => (held = resolve));
    const { page, problems } = await open(face, 'F', 'rgb_single', '&autostart=1', 15, false, async (page) => {
      await page.route('**/verify', (route) => (route.request().method() === 'POST' ? held(route) : route.continue()));
      await recordGuidance(page);
    });
    const route = await heldRoute;
    t.teardown(() => route.abort().catch(() => undefined));
    t.equal(await page.getAttribute('.lvc', 'data-guidance'), 'checking', 'the call is under way');
    await page.focus('[data-action=cancel]');
    await page.keyboard.press('Enter');
    const { component, outcome, camera, guidance } = await outcomeOf(page);
    t.equal(component, 'ended', `the component's outcome: ${JSON.stringify(outcome).slice(0, 300)}`);
    t.equal(outcome.reason, 'cancelled');
    t.equal(guidance, TEXTS.cancelled);
    t.notOk((await guidanceSeen(page)).includes('failed'), 'never shown as a failure');
    t.equal(camera, false, 'the camera is released');
    t.same(await used(), before, 'nothing charged: the call never reached the service');
    t.same(problems, []);
  });

  t.test('an error answer that arrives after Cancel is reported as cancelled, not as a refusal', async (t) => {
    // a verify fetch (the integrator's, through options.verify) that lets the call finish
    // after the person cancelled, with a 503 and no attempt left: the person's cancel wins
    // a page of its own on the browser whose camera plays the face (shared with the tests above)
    const page = await (await contextFor(face, 'F')).newPage();
    page.setDefaultTimeout(240_000);
    await page.goto(`${example.url}/capture/`); // the example's origin, where capture.js is served
    // a string, not a function: tsx would wrap the inner functions in a helper the page lacks
    const outcome = await page.evaluate(`(async () => {
      const mod = await import('/capture/capture.js');
      let calls = 0;
      const capture = mod.mountCapture(document.body, {
        baseUrl: 'http://127.0.0.1:9', sessionToken: 'lvs_unused', mode: 'rgb_single',
        verify: {
          maxAttempts: 1,
          fetch: async () => {
            calls++;
            capture.cancel();
            return new Response(JSON.stringify({ error: { code: 'server_busy', message: 'busy' } }), { status: 503, headers: { 'content-type': 'application/json' } });
          },
        },
      });
      return { outcome: await capture.start(), calls, guidance: document.querySelector('[data-testid=guidance]').textContent };
    })()`) as { outcome: { kind: string; reason?: string }; calls: number; guidance: string };
    t.equal(outcome.calls, 1, 'the call was made');
    t.same(outcome.outcome, { kind: 'ended', reason: 'cancelled', message: TEXTS.cancelled });
    t.equal(outcome.guidance, TEXTS.cancelled);
  });
}
