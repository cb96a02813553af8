// The shape every mode shares: a pure function of its captures (packets and decoded
// pixels) and of the loaded graphs, run whole inside an inference worker, so a capture
// crosses to the pool once and its result record comes back once.
import type { PreparedCapture } from '../../packets/index.ts';
import type { Policy } from '../decision.ts';
import type { Manifest } from '../manifest.ts';
import type { ModuleRunner } from '../runner.ts';
import type { ResultRecord } from '../types.ts';

export interface ModeContext {
  runner: ModuleRunner;
  manifest: Manifest;
  policy: Policy;
}

/** One result record per capture, in order. */
export type CaptureMode = (ctx: ModeContext, captures: PreparedCapture[]) => Promise<ResultRecord[]>;
