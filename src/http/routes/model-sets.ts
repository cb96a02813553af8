// Admin API for hot model-set change (models/README.md "Changing the model set live").
// The engine lives in the main thread; these handlers post it a request and read its state
// (src/inference/model-set-requests.ts), so an API worker never waits for a warm-up.
import { Type } from '@sinclair/typebox';
import { bodyParser } from '../../packets/index.ts';
import { ServiceError } from '../../errors/index.ts';
import { availableModelSets, newActivationRequest, readModelSetState } from '../../inference/index.ts';
import { readJson } from '../body.ts';
import { json } from '../respond.ts';
import { detPlot, modelSetViews } from '../../admin/index.ts';
import type { Router } from '../router.ts';
import type { Services } from '../services.ts';

export const ModelSetActivateSchema = Type.Object(
  { model_set: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }) },
  { additionalProperties: false },
);
const parseActivate = bodyParser(ModelSetActivateSchema);

export function modelSetRoutes(router: Router, s: Services): void {
  const state = () => readModelSetState(s.config.DATA_DIR) ?? {
    active: s.config.MODEL_SET, activating: null, last: null, last_request_id: null, available: availableModelSets(s.config.MODELS_DIR),
  };

  router.admin('GET', '/admin/api/model-set', () => {
    return json(200, state());
  });

  // the console's models page: every set in MODELS_DIR, its manifest's word on training, its
  // graphs and modes, and its last calibration report
  router.admin('GET', '/admin/api/model-sets', () => {
    const st = state();
    return json(200, { active: st.active, activating: st.activating, sets: modelSetViews(s.config.MODELS_DIR, s.config.DATA_DIR) });
  });

  // the DET plot `models calibrate` drew; an image, so the console shows it in an <img> (an SVG
  // there runs no script). Opened on its own it is a document: the CSP lets it run nothing.
  router.admin('GET', '/admin/api/model-sets/:id/det.svg', (_ctx, p) => {
    const svg = detPlot(s.config.DATA_DIR, p.id!);
    if (!svg) throw new ServiceError('not_found', `No calibration plot for model set ${p.id}`);
    return { status: 200, body: svg, contentType: 'image/svg+xml', headers: { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff', 'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'" } };
  });

  // 202: the set loads and warms beside the serving one (seconds to minutes); GET shows
  // `activating`, then `last` with this request's id and the outcome (active or refused).
  router.admin('POST', '/admin/api/model-set', async (ctx) => {
    const body = parseActivate(await readJson(ctx));
    if (!availableModelSets(s.config.MODELS_DIR).includes(body.model_set)) {
      throw new ServiceError('not_found', `Unknown model set ${body.model_set} (no ${body.model_set}/manifest.json in MODELS_DIR)`);
    }
    const req = newActivationRequest(body.model_set);
    s.requestModelSet(req);
    return json(202, { request_id: req.id, model_set: req.model_set, requested_at: req.at });
  });
}
