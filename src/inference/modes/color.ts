// color: the four phase frames through the difference and appearance branches, fused
// linearly with the manifest's weights; the score is the sigmoid of the fused logit.
import { PHASES, type PreparedCapture } from '../../packets/index.ts';
import { decide, retry } from '../decision.ts';
import { fuse } from '../fusion.ts';
import type { ResultRecord } from '../types.ts';
import { framePixels } from './pixels.ts';
import type { CaptureMode, ModeContext } from './types.ts';

async function one({ runner, manifest, policy }: ModeContext, c: PreparedCapture): Promise<ResultRecord> {
  const spec = manifest.modules.color_liveness!.modes.color;
  const { packet } = c;
  const frames = packet.frames;
  if (!packet.complete) return retry(packet, policy, 'incomplete_capture');
  if (!frames.some((f) => f.status === 'ok')) return retry(packet, policy, 'no_usable_frames');
  if (frames[frames.length - 1].status !== 'ok') return retry(packet, policy, 'terminal_frame_unavailable');
  // Fusion needs all four phases ok. The contract keeps incomplete_capture for complete=false,
  // so a complete group with a failed phase has too few usable frames for its window.
  const whole = frames.length === PHASES.length && frames.every((f, i) => f.status === 'ok' && f.phase === PHASES[i]);
  if (!whole) return retry(packet, policy, 'insufficient_final_window');
  const out = await runner.runColor(frames.map((_, i) => framePixels(c, i)));
  const { logits, score } = fuse(spec.fusion, out.difference.logit, out.appearance.logit);
  return decide(packet, policy, score, { color_logits: logits });
}

export const runColor: CaptureMode = async (ctx, captures) => {
  const out: ResultRecord[] = [];
  for (const c of captures) out.push(await one(ctx, c));
  return out;
};
