// The capture component (issue 41): a camera, eye landmarks, plain-word guidance and the
// spec's three capture modes, verified with a device session token. It renders into an
// element the integrator gives it and resolves one typed outcome per start():
//   const c = mountCapture(el, { baseUrl, sessionToken, mode: 'rgb_single' });
//   const outcome = await c.start();
// The landmark engine (face-api on TensorFlow.js) is a separate chunk imported on start, its
// models and WASM files fetched from `assetsUrl` (the integrator's origin).

import {
  buildCapture, createVerifyClient, eyeCrop320, LIMITS,
  type FrameInput, type Mode, type ModuleId, type Phase, type VerifyClientOptions, type VerifyResponse,
} from '../../client/src/index.ts';
import type { Engine, EngineOptions, FaceFinding, Point } from './engine.ts';
import { FrameSource, painted, type GrabbedFrame } from './frames.ts';
import { DEFAULT_LIMITS, MAX_TURN, TEXTS, advise, boxLuma, eyesPlaced, yawOf, type Guidance, type GuidanceLimits } from './guidance.ts';

export { TEXTS, DEFAULT_LIMITS, MAX_TURN, advise, eyesPlaced, yawOf, type Guidance, type GuidanceLimits };
export type { FaceFinding, Point, Engine };

export interface CaptureOptions {
  /** the service, e.g. https://liveness.example (its CORS_ORIGINS must list this page's origin) */
  baseUrl: string;
  /** the device session token (lvs_...) the integrator's backend minted for this visit */
  sessionToken: string;
  mode: Mode;
  /** folder URL of capture.js's models/ and wasm/; default: where capture.js was loaded from */
  assetsUrl?: string;
  /** consecutive frames of an rgb_sequence; default 8 */
  sequenceFrames?: number;
  /** how long to guide the person before giving up, in ms; default 30 000 */
  faceTimeoutMs?: number;
  /** good analysed frames in a row before capturing; default 3 */
  steadyFrames?: number;
  /** the preview is mirrored like a mirror (default true); crops never are */
  mirrorPreview?: boolean;
  /** replace any guidance text */
  texts?: Partial<Record<Guidance, string>>;
  limits?: Partial<GuidanceLimits>;
  engine?: Pick<EngineOptions, 'backend' | 'inputSize' | 'minScore'>;
  /** retry settings and fetch of the verify client (client/'s createVerifyClient) */
  verify?: Omit<VerifyClientOptions, 'baseUrl' | 'token'>;
  /** diagnostics: called for every frame put into the capture, before upload; the component
   * keeps none of these after the call */
  onFrame?: (f: { source_index: number; timestamp_us: number; image: ImageData; eyes: [Point, Point]; crop: Uint8Array }) => void;
  /** called on every change of the text shown */
  onGuidance?: (g: Guidance, text: string) => void;
}

export type CaptureOutcome =
  /** the service decided: status ok, alive true or false */
  | { kind: 'verdict'; verdict: 'live' | 'not_live'; captureId: string; requestId: string; response: VerifyResponse }
  /** the service answered retry (status retry): capture again with a new start() */
  | { kind: 'retry'; reason: string; captureId: string; requestId: string; response: VerifyResponse }
  /** the service refused the call (never a verdict): the error code and whether a later retry may work */
  | { kind: 'refused'; code: string; httpStatus: number; message: string; retryable: boolean; requestId: string | null }
  /** no verdict: no call was made, or (cancelled) the person cancelled while it was under way,
   * so whether it reached the service is unknown here and the backend's reading of the session
   * is what counts; `no_face`: no face fit for a capture within faceTimeoutMs, `message` is
   * the last guidance shown (no face, turn to the camera...) */
  | { kind: 'ended'; reason: 'no_face' | 'cancelled' | 'flash_opt_out' | 'camera_denied' | 'camera_unavailable' | 'engine_failed'; message: string };

export interface CaptureHandle {
  /** runs one capture to its outcome; a second call while one runs returns the same promise */
  start(): Promise<CaptureOutcome>;
  /** ends a running capture: camera released, no call made if none was sent yet */
  cancel(): void;
  /** cancel() and remove the component's elements */
  destroy(): void;
  /** true while the camera is open */
  readonly cameraActive: boolean;
}

/** what a colour frame adds to a frame */
type ColourFields = { phase?: Phase; display_time_us?: number };

const MODULE_OF: Record<Mode, ModuleId> = { rgb_single: 'rgb_liveness', rgb_sequence: 'rgb_liveness', color: 'color_liveness' };
const PHASES: readonly Phase[] = ['white', 'red', 'green', 'blue'];
const PHASE_COLOUR: Record<Phase, string> = { white: '#ffffff', red: '#ff0000', green: '#00ff00', blue: '#0000ff' };
/** each colour stays at least this long: four phases then flash under 3 times a second, the
 * WCAG 2.3.1 general flash threshold */
const MIN_PHASE_MS = 350;
/** without the camera's capture time, a frame's time is when the page saw it, later than its
 * exposure by the camera's latency: such a frame counts for a phase only this long after the
 * colour was on screen */
const UNTIMED_LATENCY_MS = 150;

const STYLE = `
.lvc{font:16px/1.4 system-ui,sans-serif;max-width:480px;width:100%;box-sizing:border-box}
.lvc-stage{position:relative;width:100%;aspect-ratio:4/3;background:#111;border-radius:8px;overflow:hidden}
.lvc-stage video{width:100%;height:100%;object-fit:cover}
.lvc-stage video.lvc-mirror{transform:scaleX(-1)}
.lvc-guidance{min-height:2.8em;margin:.5em 0;font-size:1.1em}
.lvc-actions{display:flex;gap:.5em;flex-wrap:wrap}
.lvc button{font:inherit;padding:.6em 1.1em;min-height:44px;border-radius:6px;border:1px solid #555;background:#fff;color:#111;cursor:pointer}
.lvc button:focus-visible{outline:3px solid #1a73e8;outline-offset:2px}
.lvc-warning{border:2px solid #b26a00;background:#fff4e0;color:#111;padding:.8em;border-radius:6px;margin:.5em 0}
.lvc-flash{position:fixed;inset:0;z-index:2147483647}
`;

function scriptBase(): string {
  // import.meta.url is capture.js's own URL once bundled; assets sit beside it
  return new URL('./', import.meta.url).href;
}

/** numbers the warning's element ids, so two components on one page do not share them */
let mounted = 0;

export function mountCapture(container: HTMLElement, options: CaptureOptions): CaptureHandle {
  const id = `lvc-${++mounted}`;
  const texts = { ...TEXTS, ...options.texts };
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const doc = container.ownerDocument;
  if (!doc.getElementById('lvc-style')) {
    const style = doc.createElement('style');
    style.id = 'lvc-style';
    style.textContent = STYLE;
    doc.head.append(style);
  }
  const root = doc.createElement('section');
  root.className = 'lvc';
  root.setAttribute('aria-label', 'Face liveness check');
  root.innerHTML = `
    <div class="lvc-stage"><video muted playsinline aria-hidden="true"></video></div>
    <p class="lvc-guidance" role="status" aria-live="polite" data-testid="guidance"></p>
    <div class="lvc-warning" role="alertdialog" aria-modal="false" aria-labelledby="${id}-warning" hidden>
      <p id="${id}-warning" class="lvc-warning-text"></p>
      <div class="lvc-actions"><button type="button" data-action="flash-continue">Continue</button>
      <button type="button" data-action="flash-skip">Skip this check</button></div>
    </div>
    <div class="lvc-actions"><button type="button" data-action="start">Start</button>
    <button type="button" data-action="cancel" hidden>Cancel</button></div>`;
  container.append(root);
  const video = root.querySelector('video')!;
  if (options.mirrorPreview !== false) video.classList.add('lvc-mirror');
  const guidanceEl = root.querySelector<HTMLElement>('.lvc-guidance')!;
  const warning = root.querySelector<HTMLElement>('.lvc-warning')!;
  const startBtn = root.querySelector<HTMLButtonElement>('[data-action=start]')!;
  const cancelBtn = root.querySelector<HTMLButtonElement>('[data-action=cancel]')!;
  root.querySelector('.lvc-warning-text')!.textContent = texts.flash_warning;

  let running: Promise<CaptureOutcome> | null = null;
  let abort: AbortController | null = null;
  let stream: MediaStream | null = null;
  let shown: Guidance | null = null;

  const say = (g: Guidance) => {
    if (g === shown) return;
    shown = g;
    // the flash warning is shown once, in its box: an alertdialog named by the text that takes
    // the focus, so a screen reader reads it there; the status line stays empty meanwhile
    guidanceEl.textContent = g === 'flash_warning' ? '' : texts[g];
    root.dataset.guidance = g;
    options.onGuidance?.(g, texts[g]);
  };
  const releaseCamera = () => {
    for (const track of stream?.getTracks() ?? []) track.stop();
    stream = null;
    video.srcObject = null;
  };

  startBtn.addEventListener('click', () => void handle.start());
  cancelBtn.addEventListener('click', () => handle.cancel());
  root.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && running) handle.cancel();
  });

  async function run(signal: AbortSignal): Promise<CaptureOutcome> {
    const ended = (reason: Extract<CaptureOutcome, { kind: 'ended' }>['reason'], g: Guidance): CaptureOutcome => {
      say(g);
      return { kind: 'ended', reason, message: texts[g] };
    };
    if (options.mode === 'color') {
      // asked before anything flashes, and before the camera opens
      // a cancel (the button, Escape, destroy) while the warning shows is a cancel, not "skip"
      if (!(await askFlashConsent(signal))) return signal.aborted ? ended('cancelled', 'cancelled') : ended('flash_opt_out', 'cancelled');
    }
    say('loading');
    const base = options.assetsUrl ?? scriptBase();
    let engine: Engine;
    try {
      const mod = await import('./engine.ts');
      engine = await mod.loadEngine({ assetsUrl: base, ...options.engine });
    } catch {
      return ended('engine_failed', 'failed');
    }
    if (signal.aborted) return ended('cancelled', 'cancelled');
    say('starting_camera');
    try {
      stream = await navigator.mediaDevices.getUserMedia({
        audio: false,
        // 640x480 is plenty for a crop (the eyes 40+ pixels apart at arm's length) and keeps
        // each frame's analysis and copy cheap on a phone
        video: { facingMode: 'user', width: { ideal: 640 }, height: { ideal: 480 } },
      });
    } catch (e) {
      const name = (e as { name?: string }).name;
      return ended(name === 'NotAllowedError' || name === 'SecurityError' ? 'camera_denied' : 'camera_unavailable',
        name === 'NotAllowedError' || name === 'SecurityError' ? 'camera_denied' : 'camera_unavailable');
    }
    if (signal.aborted) return ended('cancelled', 'cancelled');
    video.srcObject = stream;
    await video.play();
    const frames = new FrameSource(video, doc.createElement('canvas'));

    const analyse = async (f: GrabbedFrame): Promise<FaceFinding | null> => {
      frames.canvas.getContext('2d')!.putImageData(f.image, 0, 0);
      try {
        return await engine.find(frames.canvas);
      } catch (e) {
        // reported as the engine's failure, not the camera's (start()'s catch)
        throw new EngineFailure(e);
      }
    };

    // guidance until the face has been fine for steadyFrames analysed frames in a row
    const deadline = performance.now() + (options.faceTimeoutMs ?? 30_000);
    const need = options.steadyFrames ?? 3;
    let good = 0;
    let previous: FaceFinding | null = null;
    let last: { frame: GrabbedFrame; finding: FaceFinding } | null = null;
    say('no_face');
    while (good < need) {
      if (performance.now() > deadline) return ended('no_face', shown === 'no_face' || shown === null ? 'no_face' : shown);
      const frame = await frames.next(signal);
      const finding = await analyse(frame);
      const advice = advise(finding, frames.width, finding ? boxLuma(frame.image, finding.box) : 0, previous, limits, frames.height);
      previous = finding;
      if (advice) {
        good = 0;
        say(advice);
      } else {
        good++;
        last = { frame, finding: finding! };
        if (good < need) say('hold_still');
      }
    }
    say('capturing');
    const size: [number, number] = [frames.width, frames.height];
    const t0 = last!.frame.time;
    const us = (t: number) => Math.max(0, Math.round((t - t0) * 1000));
    const inputs: FrameInput[] = [];
    const firstCounter = last!.frame.counter;
    const addFrame = (frame: GrabbedFrame, finding: FaceFinding | null, extra: ColourFields = {}) => {
      const source_index = frame.counter - firstCounter;
      const timestamp_us = us(frame.time);
      const eyes = finding ? byX(finding.eyes) : null;
      // no face, or eyes the service would refuse (outside the frame, one above the other):
      // the frame has no usable face, said as such; never eyes moved to fit (the crop would be
      // cut from a point the eyes are not at)
      if (!eyes || eyesPlaced(eyes, size[0], size[1]) !== 'inside') {
        inputs.push({ source_index, timestamp_us, status: 'face_unavailable', ...extra });
        return;
      }
      const crop = eyeCrop320(frame.image, eyes);
      options.onFrame?.({ source_index, timestamp_us, image: frame.image, eyes, crop });
      inputs.push({ source_index, timestamp_us, status: 'ok', source_size: size, eyes_xy: eyes, image: { bytes: crop }, ...extra });
    };
    // frames the page never saw (a gap in the counter) are reported as dropped, never renumbered;
    // their exposure times are spread evenly between their neighbours'. A capture holds at most
    // LIMITS.eventsPerCapture events (413 past it): on a page too slow to keep up, the dropped
    // frames that would pass it, leaving room for the frame after them, are left out, and the
    // service reads the gap in source_index as the missing frames it is (a reset, missing_index)
    const addDropped = (from: GrabbedFrame, to: GrabbedFrame) => {
      const gap = Math.min(to.counter - from.counter - 1, LIMITS.eventsPerCapture - 1 - inputs.length);
      for (let k = 1; k <= gap; k++) {
        inputs.push({ source_index: from.counter + k - firstCounter, timestamp_us: us(from.time + ((to.time - from.time) * k) / (gap + 1)), status: 'dropped' });
      }
    };

    if (options.mode === 'rgb_single') {
      addFrame(last!.frame, last!.finding);
    } else if (options.mode === 'rgb_sequence') {
      // the steady frame opens the sequence; the rest are recorded first (each grabbed in its
      // own frame callback) and analysed after, so a slow analysis drops no frame
      const n = Math.min(LIMITS.eventsPerCapture, Math.max(2, options.sequenceFrames ?? 8));
      const recorded = [last!.frame, ...(await frames.record(n - 1, signal))];
      let prev: GrabbedFrame | null = null;
      for (const frame of recorded) {
        if (inputs.length >= LIMITS.eventsPerCapture) break;
        if (prev) addDropped(prev, frame);
        addFrame(frame, frame === last!.frame ? last!.finding : await analyse(frame));
        prev = frame;
      }
      // a sequence that ends on a frame without a face is a retry: a few more frames, each
      // analysed at once, until one with a face closes it
      for (let extra = 0; extra < 15 && inputs.length < LIMITS.eventsPerCapture && inputs[inputs.length - 1]!.status !== 'ok'; extra++) {
        const frame = await frames.next(signal);
        addDropped(prev!, frame);
        addFrame(frame, await analyse(frame));
        prev = frame;
      }
    } else {
      await runColour(frames, analyse, addFrame, us, signal);
    }
    releaseCamera();
    if (signal.aborted) return ended('cancelled', 'cancelled');

    say('checking');
    const built = await buildCapture({ mode: options.mode, frames: inputs });
    inputs.length = 0; // the crops now live only in the request; nothing is kept after it
    const client = createVerifyClient({ ...options.verify, baseUrl: options.baseUrl, token: options.sessionToken });
    const outcome = await client.verify(MODULE_OF[options.mode], built.metadata, built.files, { signal });
    built.files.clear();
    // a cancel during the call is the person's doing, never the service's refusal: an error
    // met once the signal fired (a network error, a body cut short) is reported as cancelled
    if (outcome.kind === 'error' && signal.aborted) return ended('cancelled', 'cancelled');
    if (outcome.kind === 'error') {
      say('failed');
      return { kind: 'refused', code: outcome.code, httpStatus: outcome.httpStatus, message: outcome.message, retryable: outcome.retryable, requestId: outcome.requestId };
    }
    const v = outcome.verdicts[0]!;
    const requestId = outcome.response.request_id;
    if (v.verdict === 'retry') {
      say('try_again');
      return { kind: 'retry', reason: v.reason ?? 'unknown', captureId: v.capture_id, requestId, response: outcome.response };
    }
    say('done');
    return { kind: 'verdict', verdict: v.verdict, captureId: v.capture_id, requestId, response: outcome.response };
  }

  async function runColour(frames: FrameSource, analyse: (f: GrabbedFrame) => Promise<FaceFinding | null>,
    addFrame: (f: GrabbedFrame, finding: FaceFinding | null, extra: ColourFields) => void,
    us: (t: number) => number, signal: AbortSignal): Promise<void> {
    const flash = doc.createElement('div');
    flash.className = 'lvc-flash';
    flash.setAttribute('aria-hidden', 'true');
    doc.body.append(flash);
    try {
      let prevTime = -Infinity;
      for (const phase of PHASES) {
        flash.style.background = PHASE_COLOUR[phase];
        // the colour is on screen from the frame after it was committed: that time is the
        // phase's display time, on the camera's clock (performance.now())
        const shownAt = await painted();
        const heldUntil = shownAt + MIN_PHASE_MS;
        let frame: GrabbedFrame;
        // the phase's frame is the first one exposed after the colour was shown
        do frame = await frames.next(signal);
        while (frame.time <= (frame.exact ? shownAt : shownAt + UNTIMED_LATENCY_MS) || frame.time <= prevTime);
        const display = Math.min(Math.max(us(shownAt), us(prevTime) + 1), us(frame.time));
        addFrame(frame, await analyse(frame), { phase, display_time_us: display });
        prevTime = frame.time;
        const rest = heldUntil - performance.now();
        if (rest > 0) await new Promise((r) => setTimeout(r, rest));
      }
    } finally {
      flash.remove();
    }
  }

  function askFlashConsent(signal: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      warning.hidden = false;
      say('flash_warning');
      const cont = warning.querySelector<HTMLButtonElement>('[data-action=flash-continue]')!;
      const skip = warning.querySelector<HTMLButtonElement>('[data-action=flash-skip]')!;
      const done = (ok: boolean) => {
        warning.hidden = true;
        cont.removeEventListener('click', yes);
        skip.removeEventListener('click', no);
        signal.removeEventListener('abort', no);
        resolve(ok);
      };
      const yes = () => done(true);
      const no = () => done(false);
      cont.addEventListener('click', yes);
      skip.addEventListener('click', no);
      signal.addEventListener('abort', no);
      cont.focus();
    });
  }

  const handle: CaptureHandle = {
    start() {
      if (running) return running;
      abort = new AbortController();
      const signal = abort.signal;
      startBtn.hidden = true;
      cancelBtn.hidden = false;
      running = run(signal)
        .catch((e: unknown): CaptureOutcome => {
          if (signal.aborted) {
            say('cancelled');
            return { kind: 'ended', reason: 'cancelled', message: texts.cancelled };
          }
          say('failed');
          // what failed, as far as it is known: the landmark engine on a frame, else the camera
          // (the verify call itself ends in an outcome, never a throw)
          const reason = e instanceof EngineFailure ? 'engine_failed' : 'camera_unavailable';
          const cause = e instanceof EngineFailure ? e.cause : e;
          return { kind: 'ended', reason, message: `${texts.failed} (${cause instanceof Error ? cause.message : String(cause)})` };
        })
        .finally(() => {
          releaseCamera();
          running = null;
          abort = null;
          startBtn.hidden = false;
          startBtn.textContent = 'Start again';
          cancelBtn.hidden = true;
        });
      return running;
    },
    cancel() {
      abort?.abort(new DOMException('cancelled', 'AbortError'));
      releaseCamera();
    },
    destroy() {
      handle.cancel();
      root.remove();
    },
    get cameraActive() {
      return stream?.getTracks().some((t) => t.readyState === 'live') ?? false;
    },
  };
  return handle;
}

/** The eye points sorted by x, as the service requires. */
function byX([a, b]: [Point, Point]): [Point, Point] {
  return a[0] <= b[0] ? [a, b] : [b, a];
}

/** A failure of the landmark engine while it analysed a frame. */
class EngineFailure extends Error {
  constructor(readonly cause: unknown) {
    super('the landmark engine failed on a frame');
  }
}

/** The landmark engine alone (lazy, like the component's): for pages that want eye points
 * without the component, and for the accuracy test and bench. */
export async function loadLandmarks(options: Partial<EngineOptions> = {}): Promise<Engine> {
  const mod = await import('./engine.ts');
  return mod.loadEngine({ assetsUrl: options.assetsUrl ?? scriptBase(), ...options });
}
