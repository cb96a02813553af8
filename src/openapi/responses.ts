import { Type, type TSchema } from '@sinclair/typebox';
import { GrantSchema, ModuleIdSchema, PeriodSchema, RoleSchema } from '../admin/index.ts';
import { AUDIT_OUTCOMES } from '../store/index.ts';

// Response shapes, described for clients. They mirror the TypeScript types the handlers
// build (src/inference/types.ts, src/store/records.ts).
const Nullable = <T extends TSchema>(s: T) => Type.Union([s, Type.Null()]);
const DateTime = Type.String({ format: 'date-time' });

/** The error body with `code` narrowed to `codes` (the catalogue, or one response's codes). */
export const ErrorBodyOf = (codes: TSchema) => Type.Object({
  error: Type.Object({ code: codes, message: Type.String() }),
  request_id: Type.String(),
});

export const ValidationIssueOf = (types: TSchema) => Type.Object({
  loc: Type.Array(Type.Union([Type.String(), Type.Integer()]), { description: 'path to the offending value; see the loc convention in the API description' }),
  msg: Type.String(),
  type: types,
  input: Type.Optional(Type.Unknown()),
  ctx: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

export const ValidationErrorBodyOf = (types: TSchema) => Type.Object({ detail: Type.Array(ValidationIssueOf(types)) });

export const UsageRecord = Type.Object({
  module_id: ModuleIdSchema,
  limit: Nullable(Type.Integer()),
  period: PeriodSchema,
  used: Type.Integer(),
  remaining: Nullable(Type.Integer()),
  reset_at: Nullable(DateTime),
});

export const MeResponse = Type.Object({
  token: Type.Object({ id: Type.String(), name: Type.String(), expires_at: Nullable(DateTime), demo: Type.Boolean() }),
  usage: Type.Array(UsageRecord),
});

export const ModulesResponse = Type.Object({
  modules: Type.Array(Type.Object({ module_id: ModuleIdSchema, status: Type.Union([Type.Literal('available'), Type.Literal('disabled'), Type.Literal('unavailable')]) })),
});

export const ResultRecord = Type.Object({
  capture_id: Type.String(),
  mode: Type.Union([Type.Literal('rgb_single'), Type.Literal('rgb_sequence'), Type.Literal('color')]),
  status: Type.Union([Type.Literal('ok'), Type.Literal('retry')]),
  alive: Nullable(Type.Boolean()),
  score: Nullable(Type.Number({ minimum: 0, maximum: 1 })),
  reason: Nullable(Type.Union(['incomplete_capture', 'terminal_frame_unavailable', 'insufficient_final_window', 'no_usable_frames'].map((r) => Type.Literal(r)))),
  final_window_frames: Type.Integer({ minimum: 0, maximum: 20 }),
  window_frame_indices: Type.Array(Type.Integer()),
  reset_events: Type.Array(
    Type.Object({
      source_index: Type.Integer(),
      reason: Type.Union(['missing_index', 'face_unavailable', 'dropped', 'geometry_discontinuity', 'score_jump'].map((r) => Type.Literal(r))),
    }),
  ),
  single_score: Nullable(Type.Number()),
  temporal_logit: Nullable(Type.Number()),
  color_logits: Nullable(Type.Object({ difference: Type.Number(), appearance: Type.Number(), fused: Type.Number() })),
  model_set: Type.String(),
  decision_policy: Type.String(),
  threshold: Type.Number(),
  min_final_frames: Nullable(Type.Integer()),
});

export const VerifyResponse = Type.Object({
  request_id: Type.String(),
  module_id: ModuleIdSchema,
  charged_units: Type.Integer(),
  results: Type.Array(ResultRecord),
  usage: Type.Array(UsageRecord),
});

const ModuleHealth = Type.Object({
  enabled: Type.Boolean(),
  ready: Type.Boolean(),
  model_set: Type.String(),
  trained: Type.Boolean({ description: "the model set manifest's `trained`: false means random weights whose verdicts mean nothing (with REQUIRE_TRAINED_MODELS=1 such a module is never ready)" }),
  execution_provider: Nullable(Type.Union([Type.Literal('wasm'), Type.Literal('webgpu'), Type.Literal('native')])),
  execution_note: Type.Optional(Type.String({ description: 'present when the provider is unusual: WebGPU on a fallback (software) adapter, or WASM because WebGPU was wanted (INFERENCE_BACKEND=webgpu, or auto on a host with a GPU device) and Dawn found no adapter (docs/gpu.md lists what a GPU host needs)' })),
  error: Type.Optional(Type.String()),
});
export const HealthLive = Type.Object({ status: Type.Literal('live') });
export const HealthReady = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('not_ready')]),
  store: Type.Union([Type.Literal('ok'), Type.Literal('unavailable'), Type.Literal('writes_failing')], {
    description: 'writes_failing: the store answers but cannot write (a full disk), or (LMDB) one commit of the metering writer has run STORE_STALL_SECONDS or longer (a stuck disk; store_writes.operation `stalled`); verify calls get 503 store_unavailable until a write works again',
  }),
  store_error: Type.Optional(Type.String({ description: 'present while the store is unavailable, when it knows why: with PostgreSQL, since when no database host accepted writes (a failover under way), or since when the node lease was not renewed. It names no host (this answer needs no credentials): what each host of DATABASE_URL answered is in the node\'s log (`not ready: the store is unavailable`, and `store has no writable host` when the outage began)' })),
  store_writes: Type.Optional(Type.Object({
    since: Type.String({ format: 'date-time' }),
    operation: Type.String({ description: 'the write that failed first (reserve, settle, audit ...), or `stalled`: a commit still running since `since`' }),
    error: Type.String({ description: 'why the write failed, without the names it quoted (a file under DATA_DIR, a PostgreSQL data file): the whole message is in the node\'s log (`not ready: store writes are failing`)' }),
  }, { description: 'present while the store is failing writes' })),
  modules: Type.Record(Type.String(), ModuleHealth),
  server: Type.Optional(Type.Object({
    node: Type.String({ description: 'Node.js version, e.g. v24.11.1' }),
    uws: Nullable(Type.String({ description: 'the uWebSockets.js build that serves: package@version (binding file); docs/platforms.md' })),
  })),
});

export const AdminModule = Type.Object({
  module_id: ModuleIdSchema,
  enabled: Type.Boolean(),
  ready: Type.Boolean(),
  modes: Type.Array(Type.String()),
  model_set: Type.String(),
  trained: Nullable(Type.Boolean({ description: "the model set manifest's `trained` (false: random weights); null while the engine has not reported, and when the serving model set does not describe the module" })),
  decision_policy: Type.String({ description: "empty when the serving model set does not describe the module (or the engine has not reported)" }),
  threshold: Type.Number({ description: 'meaningless (0) when decision_policy is empty' }),
  execution_provider: Nullable(Type.String()),
});
export const User = Type.Object({ id: Type.String(), username: Type.String(), role: RoleSchema, enabled: Type.Boolean(), created_at: DateTime });
export const Token = Type.Object({
  id: Type.String(),
  name: Type.String(),
  token_prefix: Type.String(),
  enabled: Type.Boolean(),
  expires_at: Nullable(DateTime),
  demo: Type.Boolean(),
  revoked: Type.Boolean(),
  created_at: DateTime,
  grants: Type.Array(GrantSchema),
});
export const TokenDetail = Type.Composite([Token, Type.Object({ usage: Type.Array(UsageRecord) })]);
export const TokenCreated = Type.Composite([Token, Type.Object({ token: Type.String({ description: 'the plaintext, returned this once only' }) })]);
const TokenName = Nullable(Type.String({ description: 'the token\'s current name; null when the row has no token or the token is gone' }));
export const LedgerEntry = Type.Object({
  id: Type.String(),
  request_id: Type.String(),
  token_id: Type.String(),
  token_name: TokenName,
  module_id: ModuleIdSchema,
  units: Type.Integer(),
  kind: Type.Union([Type.Literal('charge'), Type.Literal('refund')]),
  at: DateTime,
});
export const AuditRecord = Type.Object({
  request_id: Type.String(),
  at: DateTime,
  token_id: Nullable(Type.String()),
  module_id: Nullable(Type.String()),
  client_ip: Type.String(),
  country: Nullable(Type.String()),
  status: Type.Integer(),
  error_code: Nullable(Type.String()),
  captures: Type.Integer(),
  charged_units: Type.Integer(),
  latency_ms: Type.Number(),
  token_name: TokenName,
  outcome: Nullable(Type.Union(AUDIT_OUTCOMES.map((o) => Type.Literal(o)), {
    description: 'live, non_live or retry when every capture had that result, mixed for a batch with several, error for any answer but 200; null on a 200 recorded before outcomes were kept',
  })),
  replayed: Nullable(Type.Boolean({ description: 'an idempotent replay (saved answer, nothing charged); null on records from before it was kept' })),
  session_id: Type.Optional(Type.String({ description: 'the device session the call was made with; absent for a business token' })),
  calls: Type.Optional(Type.Integer({ minimum: 1, description: 'present on a row that counts calls refused before a capacity slot (401, 403, 404, 503 server_busy, module_unavailable, store_unavailable, 499 before the slot): the number of such calls in one UTC minute on one API worker with the same token, session, module, client address (\'*\' past 1000 addresses a minute), status and error code. request_id, at, country are the first call\'s, latency_ms the longest. Absent on a call\'s own row' })),
  last_at: Type.Optional(DateTime),
});
export const Jwks = Type.Object({
  keys: Type.Array(Type.Object({ kty: Type.String(), crv: Type.String(), x: Type.String(), kid: Type.String(), alg: Type.String(), use: Type.String() }, { additionalProperties: true })),
});
export const Page = <T extends TSchema>(item: T) => Type.Object({ items: Type.Array(item), next_cursor: Nullable(Type.String()) });
export const Settlement = Type.Object({
  id: Type.String(),
  request_id: Type.String(),
  token_id: Type.String(),
  module_id: ModuleIdSchema,
  units: Type.Integer(),
  state: Type.String(),
  created_at: DateTime,
});

// Console at scale (issue 14): paged lists and the daily usage totals.
const NextCursor = Nullable(Type.String({ description: 'pass as `cursor` for the next page; null on the last page' }));
export const TokenList = Type.Object({
  tokens: Type.Array(Type.Composite([Token, Type.Object({ usage: Type.Optional(Type.Array(UsageRecord, { description: 'on a page (q, limit or cursor): each grant\'s usage now, so a list shows usage against limit' })) })])),
  next_cursor: Type.Optional(NextCursor),
}, { description: 'without q, limit or cursor: every token in creation order and no next_cursor; with any of them: one page in name order' });
export const UserList = Type.Object({
  users: Type.Array(User),
  next_cursor: Type.Optional(NextCursor),
}, { description: 'without q, limit or cursor: every user and no next_cursor; with any of them: one page in username order' });
export const DailyTotal = Type.Object({
  day: Type.String({ format: 'date', description: 'a UTC day' }),
  charged: Type.Integer(),
  refunded: Type.Integer(),
  units: Type.Integer({ description: 'charged minus refunded' }),
});
export const UsageDaily = Type.Object({
  from: Type.String({ format: 'date', description: 'first UTC day listed' }),
  to: Type.String({ format: 'date', description: 'last UTC day listed (inclusive)' }),
  days: Type.Array(DailyTotal, { description: 'every day of the range, oldest first, zero days included' }),
  total: Type.Integer({ description: 'sum of units over the range' }),
});

const CallBucket = Type.Object({
  start: DateTime,
  calls: Type.Integer({ minimum: 0 }),
  ok: Type.Integer({ minimum: 0, description: 'answers below 400' }),
  client_error: Type.Integer({ minimum: 0 }),
  server_error: Type.Integer({ minimum: 0 }),
  live: Type.Integer({ minimum: 0 }),
  non_live: Type.Integer({ minimum: 0 }),
  retry: Type.Integer({ minimum: 0 }),
  mixed: Type.Integer({ minimum: 0 }),
});
export const Overview = Type.Object({
  at: DateTime,
  last_hour: Type.Array(CallBucket, { description: '60 buckets of a minute, oldest first (verify calls, from the audit log)' }),
  last_day: Type.Array(CallBucket, { description: '24 buckets of an hour, oldest first' }),
  complete_from: Nullable(DateTime),
  slots: Type.Object({ total: Type.Integer({ minimum: 0 }), in_use: Type.Integer({ minimum: 0 }) }),
  modules: Type.Array(AdminModule),
  pending_settlements: Type.Integer({ minimum: 0 }),
  near_limit: Type.Array(Type.Object({
    token_id: Type.String(), token_name: Type.String(), module_id: Type.String(), used: Type.Integer(), limit: Type.Integer(), period: Type.String(), reset_at: Nullable(DateTime),
  })),
  near_limit_truncated: Type.Boolean(),
});

export const StoredResults = Type.Object({
  request_id: Type.String(),
  at: DateTime,
  token_id: Type.String(),
  module_id: Type.String(),
  results: Type.Array(Type.Object({}, { additionalProperties: true, description: 'a result record exactly as the verify answer had it' })),
});
const GraphView = Type.Object({ file: Type.String(), role: Type.String(), output_kind: Type.String(), size: Nullable(Type.Integer()), layout: Nullable(Type.String()) });
export const ModelSetList = Type.Object({
  active: Type.String(),
  activating: Nullable(Type.String()),
  sets: Type.Array(Type.Object({
    model_set: Type.String(),
    trained: Nullable(Type.Boolean({ description: "the manifest's trained; null when the manifest does not load (error)" })),
    description: Nullable(Type.String()),
    error: Nullable(Type.String()),
    modules: Type.Record(Type.String(), Type.Object({
      graphs: Type.Array(GraphView),
      modes: Type.Record(Type.String(), Type.Object({ decision_policy: Type.String(), threshold: Type.Number() })),
    })),
    calibration: Nullable(Type.Object({
      at: DateTime,
      counts: Type.Object({ bona_fide: Type.Integer(), attack: Type.Integer() }),
      manifest_threshold: Type.Unknown(),
      targets: Type.Array(Type.Unknown()),
      eer: Type.Unknown(),
      det_plot: Type.Boolean({ description: 'GET /admin/api/model-sets/{id}/det.svg serves the plot' }),
    })),
  })),
});
