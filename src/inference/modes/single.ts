// rgb_single: the terminal frame's ensemble score against the threshold. Takes several
// captures at once so the engine can pack single frames, of one request or of several,
// into model batches of up to MAX_BATCH.
import { decide, retry } from '../decision.ts';
import { MAX_BATCH } from '../manifest.ts';
import type { ResultRecord } from '../types.ts';
import { framePixels } from './pixels.ts';
import type { CaptureMode } from './types.ts';

export const runSingle: CaptureMode = async ({ runner, policy }, captures) => {
  const results: (ResultRecord | null)[] = [];
  const scored: number[] = [];
  const pixels: Uint8Array[] = [];
  for (const [i, c] of captures.entries()) {
    const { packet } = c;
    const last = packet.frames.length - 1;
    if (!packet.complete) results.push(retry(packet, policy, 'incomplete_capture'));
    else if (!packet.frames.some((f) => f.status === 'ok')) results.push(retry(packet, policy, 'no_usable_frames'));
    else if (packet.frames[last].status !== 'ok') results.push(retry(packet, policy, 'terminal_frame_unavailable'));
    else {
      results.push(null);
      scored.push(i);
      pixels.push(framePixels(c, last));
    }
  }
  for (let from = 0; from < scored.length; from += MAX_BATCH) {
    const out = await runner.runFrames(pixels.slice(from, from + MAX_BATCH));
    out.probability.forEach((score, b) => {
      const i = scored[from + b];
      results[i] = decide(captures[i].packet, policy, score, { single_score: score });
    });
  }
  return results as ResultRecord[];
};
