// The three modes, one file each with the same shape (types.ts), and the per-mode
// decision policies read from the manifest (the engine shows them in readiness; the
// inference worker decides with them).
import type { Mode, ModuleId } from '../../contract/index.ts';
import type { Policy } from '../decision.ts';
import { minFinalFrames, type Manifest } from '../manifest.ts';
import type { ModePolicy } from '../types.ts';
import { runColor } from './color.ts';
import { runSequence } from './sequence.ts';
import { runSingle } from './single.ts';
import type { CaptureMode } from './types.ts';

export type { CaptureMode, ModeContext } from './types.ts';

export const MODES: Record<Mode, CaptureMode> = {
  rgb_single: runSingle,
  rgb_sequence: runSequence,
  color: runColor,
};

export function modePolicies(manifest: Manifest, id: ModuleId): ModePolicy[] {
  const out: ModePolicy[] = [];
  if (id === 'rgb_liveness') {
    const m = manifest.modules.rgb_liveness?.modes;
    if (m?.rgb_single) out.push({ mode: 'rgb_single', decision_policy: m.rgb_single.decision_policy, threshold: m.rgb_single.threshold, min_final_frames: null });
    if (m?.rgb_sequence) out.push({ mode: 'rgb_sequence', decision_policy: m.rgb_sequence.decision_policy, threshold: m.rgb_sequence.threshold, min_final_frames: minFinalFrames(m.rgb_sequence) });
  } else {
    const c = manifest.modules.color_liveness?.modes.color;
    if (c) out.push({ mode: 'color', decision_policy: c.decision_policy, threshold: c.threshold, min_final_frames: null });
  }
  return out;
}

export function policyFor(manifest: Manifest, module: ModuleId, mode: Mode): Policy {
  const p = modePolicies(manifest, module).find((m) => m.mode === mode);
  if (!p) throw new Error(`model set ${manifest.model_set} has no ${mode} mode in ${module}`);
  return { model_set: manifest.model_set, decision_policy: p.decision_policy, threshold: p.threshold, min_final_frames: p.min_final_frames };
}
