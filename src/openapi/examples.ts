// Example values for the document. Every one is checked against its schema by
// `redocly lint` (no-invalid-media-type-examples is an error in redocly.yaml), so an example
// that no longer fits its shape fails `npm test`.

import { encodeCursor } from '../admin/index.ts';

export const REQUEST_ID = '7f1c2d4e-5a6b-4c8d-9e0f-1a2b3c4d5e6f';
const AT = '2026-11-23T09:30:00.000Z';
const SHA = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';

export const usage = { module_id: 'rgb_liveness', limit: 1000, period: 'day', used: 1, remaining: 999, reset_at: '2026-11-24T00:00:00.000Z' };

export const capturePacket = {
  protocol_version: 1,
  capture_id: 'c-1',
  mode: 'rgb_single',
  capture_profile: 'rgb_single_v1',
  preprocess_profile: 'eye_crop_320_v1',
  complete: true,
  frames: [{
    source_index: 0, timestamp_us: 0, status: 'ok', source_size: [640, 480], eyes_xy: [[280, 200], [360, 202]],
    image: { part: 'f0', encoding: 'png', sha256: SHA },
  }],
};

export const verifyRequest = { metadata: JSON.stringify(capturePacket), f0: '<the PNG bytes whose SHA-256 is image.sha256>' };

export const verifyResponse = {
  request_id: REQUEST_ID,
  module_id: 'rgb_liveness',
  charged_units: 1,
  results: [{
    capture_id: 'c-1', mode: 'rgb_single', status: 'ok', alive: true, score: 0.93, reason: null,
    final_window_frames: 1, window_frame_indices: [0], reset_events: [], single_score: 0.93, temporal_logit: null,
    color_logits: null, model_set: 'raw_v1', decision_policy: 'single_frame_v1', threshold: 0.5, min_final_frames: null,
  }],
  usage: [usage],
};

export const me = { token: { id: 'tok_4vX9Qm2Lr8Tz', name: 'kiosk-17', expires_at: null, demo: false }, usage: [usage] };
export const modules = { modules: [{ module_id: 'rgb_liveness', status: 'available' }, { module_id: 'color_liveness', status: 'disabled' }] };

export const healthReady = {
  status: 'ready', store: 'ok',
  modules: { rgb_liveness: { enabled: true, ready: true, model_set: 'raw_v1', trained: false, execution_provider: 'wasm' } },
  server: { node: 'v24.11.1', uws: '@btc-vision/uwebsockets.js@20.57.0 (uws_linux_x64_137.node)' },
};
export const jwks = { keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo', kid: 'k-2026-11-01', alg: 'EdDSA', use: 'sig' }] };

export const session = { username: 'root', role: 'admin', csrf_token: 'c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6', expires_at: '2026-11-23T21:30:00.000Z' };

export const adminModule = {
  module_id: 'rgb_liveness', enabled: true, ready: true, modes: ['rgb_single', 'rgb_sequence'], model_set: 'raw_v1', trained: false,
  decision_policy: 'single_frame_v1', threshold: 0.5, execution_provider: 'wasm',
};
export const user = { id: 'usr_8kq2Wf0Zp1Ns', username: 'operator', role: 'admin', enabled: true, created_at: AT };
export const grant = { module_id: 'rgb_liveness', limit: 1000, period: 'day' };
export const token = {
  id: 'tok_4vX9Qm2Lr8Tz', name: 'kiosk-17', token_prefix: 'lvk_Ab3dEf9h', enabled: true, expires_at: null, demo: false,
  revoked: false, created_at: AT, grants: [grant],
};
export const tokenDetail = { ...token, usage: [usage] };
export const tokenCreated = { ...token, token: 'lvk_Ab3dEf9hIjKlMnOpQrStUvWxYz0123456789AbCdEfG' };
// Cursors as the pagers make them (src/admin/page-query.ts): the last key served, [epoch ms, id]
// for the time-ordered pages, [name, id] for the name-ordered lists. An example a client
// copies must be one the service accepts.
export const ledgerCursor = encodeCursor([Date.parse(AT), 'led_Qm2Lr8Tz4vX9']);
export const auditCursor = encodeCursor([Date.parse(AT), REQUEST_ID]);
export const nameCursor = encodeCursor(['kiosk-17', 'tok_4vX9Qm2Lr8Tz']);

export const ledgerPage = {
  items: [{ id: 'led_Qm2Lr8Tz4vX9', request_id: REQUEST_ID, token_id: token.id, module_id: 'rgb_liveness', units: 1, kind: 'charge', at: AT, token_name: token.name }],
  next_cursor: null,
};
export const auditPage = {
  items: [{
    request_id: REQUEST_ID, at: AT, token_id: token.id, module_id: 'rgb_liveness', client_ip: '203.0.113.7', country: 'DE',
    status: 200, error_code: null, captures: 1, charged_units: 1, latency_ms: 84.2,
    outcome: 'live', replayed: false, token_name: token.name,
  }],
  next_cursor: auditCursor,
};
export const settlement = {
  id: 'res_Lr8Tz4vX9Qm2', request_id: REQUEST_ID, token_id: token.id, module_id: 'rgb_liveness', units: 1,
  state: 'settlement_failed', created_at: AT,
};

/** A 422 answer for an operation whose body is JSON. */
export const jsonValidation = { detail: [{ loc: ['body', 'name'], msg: 'Field required', type: 'missing' }] };
export const verifyValidation = {
  detail: [{
    loc: ['body', 'metadata', 'frames', 0, 'eyes_xy'], msg: 'eyes_xy must be sorted by x ascending', type: 'eyes_not_sorted',
    input: [[360, 202], [280, 200]],
  }],
};
export const queryValidation = { detail: [{ loc: ['query', 'limit'], msg: 'Input should be an integer from 1 to 1000', type: 'int_parsing', input: '0' }] };

const bucket = (start: string, calls: number) => ({ start, calls, ok: calls, client_error: 0, server_error: 0, live: calls, non_live: 0, retry: 0, mixed: 0 });
export const overview = {
  at: '2026-11-23T10:00:30.000Z',
  last_hour: [bucket('2026-11-23T09:01:00.000Z', 0), bucket('2026-11-23T10:00:00.000Z', 12)],
  last_day: [bucket('2026-11-22T11:00:00.000Z', 40), bucket('2026-11-23T10:00:00.000Z', 12)],
  complete_from: null,
  slots: { total: 16, in_use: 3 },
  modules: [adminModule],
  pending_settlements: 0,
  near_limit: [{ token_id: 'tok_3kq9Vf2Lp8Zs', token_name: 'kiosk-17', module_id: 'rgb_liveness', used: 850, limit: 1000, period: 'day', reset_at: '2026-11-24T00:00:00.000Z' }],
  near_limit_truncated: false,
};

export const storedResults = {
  request_id: '6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b', at: '2026-11-23T10:00:01.000Z', token_id: 'tok_3kq9Vf2Lp8Zs', module_id: 'rgb_liveness',
  results: [{ capture_id: 'c-1', mode: 'rgb_single', status: 'ok', alive: true, score: 0.91 }],
};
export const modelSets = {
  active: 'raw_v1',
  activating: null,
  sets: [{
    model_set: 'raw_v1', trained: false, description: 'Untrained reference graphs', error: null,
    modules: { rgb_liveness: { graphs: [{ file: 'rgb_frame.onnx', role: 'frame', output_kind: 'logit', size: 128, layout: 'NCHW' }], modes: { rgb_single: { decision_policy: 'single_frame_v1', threshold: 0.5 } } } },
    calibration: null,
  }],
};
