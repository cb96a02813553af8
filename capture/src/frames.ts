// Camera frames with their exposure times. requestVideoFrameCallback gives, per frame the
// compositor receives, a running frame counter (presentedFrames: a gap is a frame this page
// never saw) and, for camera streams, captureTime: when the frame was exposed, on the
// performance.now() clock, the same clock the colour phases are timed on. Where the browser
// has no requestVideoFrameCallback, animation frames stand in: a new frame is one whose
// currentTime moved, its time is when the page noticed it (later than the exposure, so a
// colour phase waits longer, never shorter).

export interface GrabbedFrame {
  /** the compositor's frame counter: consecutive numbers are consecutive camera frames */
  counter: number;
  /** exposure time in ms on the performance.now() clock (see `exact`) */
  time: number;
  /** true when `time` is the camera's capture time, false when it is when the page saw it */
  exact: boolean;
  /** the upright, unmirrored frame as the camera delivered it (RGBA) */
  image: ImageData;
}

interface FrameMeta {
  presentedFrames: number;
  captureTime?: number;
  presentationTime: number;
}

export class CameraStalledError extends Error {
  constructor(ms: number) {
    super(`the camera delivered no frame for ${ms} ms`);
    this.name = 'CameraStalledError';
  }
}

export class FrameSource {
  private readonly ctx: CanvasRenderingContext2D;
  private fallbackCounter = 0;
  private lastMediaTime = -1;

  constructor(private readonly video: HTMLVideoElement, readonly canvas: HTMLCanvasElement) {
    const ctx = canvas.getContext('2d', { willReadFrequently: true });
    if (!ctx) throw new Error('no 2D canvas context');
    this.ctx = ctx;
  }

  get width(): number {
    return this.video.videoWidth;
  }

  get height(): number {
    return this.video.videoHeight;
  }

  /** The next frame the camera delivers after this call. `signal` ends the wait; so does a
   * camera that delivers nothing for `timeoutMs` (a stalled or covered-up device must not
   * leave the person waiting for ever), with a CameraStalledError. */
  next(signal: AbortSignal, timeoutMs = 5000): Promise<GrabbedFrame> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal.reason);
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        reject(new CameraStalledError(timeoutMs));
      }, timeoutMs);
      signal.addEventListener('abort', onAbort, { once: true });
      this.waitFrame((meta) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) return;
        resolve(this.grab(meta));
      });
    });
  }

  /** `count` consecutive frames as they come, each grabbed in its own frame callback so none
   * is skipped while an analysis runs; a frame the page still missed shows as a counter gap. */
  record(count: number, signal: AbortSignal, timeoutMs = 5000): Promise<GrabbedFrame[]> {
    return new Promise((resolve, reject) => {
      const frames: GrabbedFrame[] = [];
      let timer: ReturnType<typeof setTimeout> | undefined;
      let done = false;
      const finish = (err: unknown, value?: GrabbedFrame[]) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        if (value) resolve(value);
        else reject(err);
      };
      const onAbort = () => finish(signal.reason);
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => finish(new CameraStalledError(timeoutMs)), timeoutMs);
      };
      if (signal.aborted) {
        onAbort();
        return;
      }
      signal.addEventListener('abort', onAbort, { once: true });
      const step = (meta: FrameMeta) => {
        if (done) return;
        frames.push(this.grab(meta));
        if (frames.length >= count) {
          finish(null, frames);
        } else {
          arm();
          this.waitFrame(step);
        }
      };
      arm();
      this.waitFrame(step);
    });
  }

  private grab(meta: FrameMeta): GrabbedFrame {
    const w = this.video.videoWidth;
    const h = this.video.videoHeight;
    if (this.canvas.width !== w || this.canvas.height !== h) {
      this.canvas.width = w;
      this.canvas.height = h;
    }
    // drawn as delivered: the preview's mirroring is a CSS transform on the video element only
    this.ctx.drawImage(this.video, 0, 0, w, h);
    const exact = typeof meta.captureTime === 'number' && meta.captureTime > 0;
    return {
      counter: meta.presentedFrames,
      time: exact ? meta.captureTime! : meta.presentationTime,
      exact,
      image: this.ctx.getImageData(0, 0, w, h),
    };
  }

  private waitFrame(cb: (meta: FrameMeta) => void): void {
    const video = this.video as HTMLVideoElement & { requestVideoFrameCallback?: (cb: (now: number, meta: FrameMeta) => void) => number };
    if (typeof video.requestVideoFrameCallback === 'function') {
      video.requestVideoFrameCallback((_now, meta) => cb(meta));
      return;
    }
    const poll = (now: number) => {
      if (this.video.currentTime !== this.lastMediaTime) {
        this.lastMediaTime = this.video.currentTime;
        cb({ presentedFrames: ++this.fallbackCounter, presentationTime: now });
      } else {
        requestAnimationFrame(poll);
      }
    };
    requestAnimationFrame(poll);
  }
}

/** Resolves after the next two animation frames: a style set before the call has then been
 * painted (the first frame commits it, the second starts after it was presented). Returns the
 * second frame's time, on the performance.now() clock. */
export function painted(): Promise<number> {
  return new Promise((resolve) => {
    requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now())));
  });
}
