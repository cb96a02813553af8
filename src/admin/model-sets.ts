// The console's models page (issue 25): every model set in MODELS_DIR with what its manifest
// says (trained, graphs, modes) and the last calibration report the CLI wrote for it
// (`models calibrate`, DATA_DIR/calibration/<set>/report.json and det.svg). Read from files
// on each call: sets are few and small, and an operator may have just imported one.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { availableModelSets, loadManifest } from '../inference/index.ts';

export interface GraphView {
  file: string;
  role: string;
  output_kind: string;
  size: number | null;
  layout: string | null;
}

export interface ModelSetView {
  model_set: string;
  /** null when the manifest does not load (error says why) */
  trained: boolean | null;
  description: string | null;
  error: string | null;
  modules: Record<string, { graphs: GraphView[]; modes: Record<string, { decision_policy: string; threshold: number }> }>;
  calibration: {
    at: string;
    counts: { bona_fide: number; attack: number };
    manifest_threshold: unknown;
    targets: unknown[];
    eer: unknown;
    /** GET /admin/api/model-sets/{id}/det.svg serves the plot */
    det_plot: boolean;
  } | null;
}

export const calibrationDir = (dataDir: string, set: string) => join(dataDir, 'calibration', set);

function calibrationOf(dataDir: string, set: string): ModelSetView['calibration'] {
  const dir = calibrationDir(dataDir, set);
  try {
    const r = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8')) as Record<string, unknown>;
    return {
      // the report does not carry its own time: when it was written is the file's
      at: new Date(statSync(join(dir, 'report.json')).mtimeMs).toISOString(),
      counts: (r.counts as { bona_fide: number; attack: number }) ?? { bona_fide: 0, attack: 0 },
      manifest_threshold: r.manifest_threshold ?? null,
      targets: Array.isArray(r.targets) ? r.targets : [],
      eer: r.eer ?? null,
      det_plot: existsSync(join(dir, 'det.svg')),
    };
  } catch {
    return null;
  }
}

export function modelSetViews(modelsDir: string, dataDir: string): ModelSetView[] {
  return availableModelSets(modelsDir).map((name) => {
    const base: ModelSetView = { model_set: name, trained: null, description: null, error: null, modules: {}, calibration: calibrationOf(dataDir, name) };
    try {
      const m = loadManifest(join(modelsDir, name));
      base.trained = m.trained;
      base.description = m.description ?? null;
      for (const [id, mod] of Object.entries(m.modules)) {
        if (!mod) continue;
        base.modules[id] = {
          graphs: mod.graphs.map((g) => ({
            file: g.file,
            role: g.role,
            output_kind: g.output_kind,
            size: 'size' in g ? g.size : null,
            layout: 'layout' in g ? g.layout : null,
          })),
          modes: Object.fromEntries(Object.entries(mod.modes as Record<string, { decision_policy: string; threshold: number } | undefined>)
            .filter((e): e is [string, { decision_policy: string; threshold: number }] => e[1] !== undefined)
            .map(([k, v]) => [k, { decision_policy: v.decision_policy, threshold: v.threshold }])),
        };
      }
    } catch (e) {
      base.error = (e as Error).message;
    }
    return base;
  });
}

/** The DET plot of a set's last calibration, or null. */
export function detPlot(dataDir: string, set: string): Buffer | null {
  if (!availableSetName(set)) return null;
  try {
    return readFileSync(join(calibrationDir(dataDir, set), 'det.svg'));
  } catch {
    return null;
  }
}

const availableSetName = (set: string) => /^[A-Za-z0-9._-]{1,64}$/.test(set) && set !== '.' && set !== '..';
