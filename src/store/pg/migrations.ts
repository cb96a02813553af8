// Schema migrations of the PostgreSQL store, applied in order under an advisory lock (so
// several nodes starting at once apply each exactly once). They create tables, columns and
// indexes only: a change of these is a new entry appended here, never an edit of an applied
// one. The rules (stored functions and triggers) are no migration: each is written in the file
// of the job that calls it (reserve.ts, settle.ts, recovery.ts, device-sessions.ts) and
// installed where the database's differ, checked at every start under the same lock (rules.ts).
//
// Entries 1 and 5 created those functions (and the trigger) too, until rules version 1: the
// only edit of applied entries ever made, which took out their text and nothing else. A
// database migrated by the earlier list has them already and gets them replaced, with the same
// text, at its next start; a new one gets them from rules.ts; the tables are the same either
// way (test/store/pg-rules.test.ts builds both and compares them).
//
// Times: *_ms columns are epoch milliseconds of the service clock (quota windows and
// records follow the service's clock, which tests can move); node leases use the database
// clock (now()), so nodes with skewed clocks still agree on who is alive.

const V1 = `
CREATE TABLE users (
  id text PRIMARY KEY,
  username text NOT NULL UNIQUE,
  record jsonb NOT NULL,
  created_at text NOT NULL
);
CREATE TABLE tokens (
  id text PRIMARY KEY,
  hash text NOT NULL UNIQUE,
  record jsonb NOT NULL,
  created_at text NOT NULL
);
CREATE TABLE modules (module_id text PRIMARY KEY, enabled boolean NOT NULL);
CREATE TABLE counters (
  token_id text NOT NULL, module_id text NOT NULL, period text NOT NULL, win text NOT NULL,
  used bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (token_id, module_id, period, win)
);
CREATE TABLE ledger (
  id text PRIMARY KEY,
  at_ms bigint NOT NULL,
  request_id text NOT NULL, token_id text NOT NULL, module_id text NOT NULL,
  units integer NOT NULL, kind text NOT NULL CHECK (kind IN ('charge', 'refund')),
  day text NOT NULL, month text NOT NULL,
  reservation_id text NOT NULL,
  UNIQUE (reservation_id, kind)
);
CREATE INDEX ledger_time ON ledger (at_ms, id);
CREATE TABLE nodes (
  id text PRIMARY KEY,
  info jsonb NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  lease_until timestamptz NOT NULL
);
CREATE TABLE reservations (
  id text PRIMARY KEY,
  request_id text NOT NULL, token_id text NOT NULL, module_id text NOT NULL,
  units integer NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'charged', 'refunded', 'settlement_failed')),
  day text NOT NULL, month text NOT NULL,
  created_at text NOT NULL, settled_at text, settled_ms bigint,
  node_id text NOT NULL,
  idempotency_key text,
  unsaved_body text
);
CREATE INDEX reservations_open ON reservations (node_id) WHERE state = 'pending';
CREATE INDEX reservations_failed ON reservations (created_at) WHERE state = 'settlement_failed';
CREATE INDEX reservations_settled ON reservations (settled_ms) WHERE state IN ('charged', 'refunded');
CREATE TABLE idempotency (
  token_id text NOT NULL, key text NOT NULL,
  state text NOT NULL CHECK (state IN ('pending', 'completed')),
  fingerprint text NOT NULL, request_id text NOT NULL, reservation_id text NOT NULL,
  created_at text NOT NULL, completed_at text, completed_ms bigint,
  status integer, body text,
  PRIMARY KEY (token_id, key)
);
CREATE INDEX idempotency_completed ON idempotency (completed_ms) WHERE state = 'completed';
CREATE TABLE results (request_id text PRIMARY KEY, record jsonb NOT NULL);
CREATE TABLE audit (
  at_ms bigint NOT NULL, request_id text NOT NULL, record jsonb NOT NULL,
  PRIMARY KEY (at_ms, request_id)
);
CREATE TABLE sessions (key text PRIMARY KEY, user_id text NOT NULL, record jsonb NOT NULL);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE TABLE login_throttle (
  key text PRIMARY KEY, count integer NOT NULL, window_start bigint NOT NULL, last_failure bigint NOT NULL
);
CREATE TABLE login_known (name text NOT NULL, address text NOT NULL, at_ms bigint NOT NULL, PRIMARY KEY (name, address));
`;

// Verdict-signing keys shared by every node (issue 11). The private JWK is stored as it is:
// whoever can SELECT this table can sign verdicts (docs/several-nodes.md, "Private keys at
// rest"). At most one key is current (retired_at NULL), enforced by the partial unique index, so nodes that
// start together cannot create two.
const V_SIGNING_KEYS = `
CREATE TABLE signing_keys (
  seq bigserial NOT NULL,
  kid text PRIMARY KEY,
  created_at text NOT NULL,
  retired_at text,
  retired_ms bigint,
  jwk jsonb NOT NULL
);
CREATE UNIQUE INDEX signing_keys_one_current ON signing_keys ((true)) WHERE retired_at IS NULL;
`;

// Retention (docs/operations.md "Retention"): pruned ledger entries leave their units here,
// keyed like the counters, so `ledger verify` still proves counters = pruned totals + entries; result
// records are pruned by their settlement time.
const V_RETENTION = `
CREATE TABLE ledger_pruned (
  token_id text NOT NULL, module_id text NOT NULL, period text NOT NULL, win text NOT NULL,
  units bigint NOT NULL,
  PRIMARY KEY (token_id, module_id, period, win)
);
CREATE INDEX results_at ON results ((record->>'at'));
`;

// Emergency revocation of a signing key (`keys revoke`): the row stays, without its private
// part, as the record of who revoked it and when; a revoked key is never published.
const V_KEY_REVOCATION = `
ALTER TABLE signing_keys ADD COLUMN revoked_at text, ADD COLUMN revoked_by text;
`;

// Device sessions (issue 26): their rules (lv_mint_session, lv_reserve_session and the trigger
// that gives a refunded reservation's captures back) are in src/store/pg/device-sessions.ts.
const V_DEVICE_SESSIONS = `
CREATE TABLE device_sessions (
  id text PRIMARY KEY,
  hash text NOT NULL UNIQUE,
  token_id text NOT NULL,
  module_id text NOT NULL,
  created_at text NOT NULL, created_ms bigint NOT NULL,
  expires_at text NOT NULL, expires_ms bigint NOT NULL,
  max_captures integer NOT NULL,
  captures_used integer NOT NULL DEFAULT 0,
  revoked_at text
);
CREATE INDEX device_sessions_token ON device_sessions (token_id, created_ms);
CREATE INDEX device_sessions_expires ON device_sessions (expires_ms);
CREATE TABLE device_session_calls (
  seq bigserial NOT NULL,
  reservation_id text PRIMARY KEY,
  session_id text NOT NULL,
  request_id text NOT NULL,
  units integer NOT NULL,
  at text NOT NULL, at_ms bigint NOT NULL,
  refunded boolean NOT NULL DEFAULT false
);
CREATE INDEX device_session_calls_session ON device_session_calls (session_id, seq);
`;

// Token names: each token's name key (tokenNameKey), stored beside its record by the code that
// writes it and indexed, for GET /admin/api/tokens?name= and the uniqueness check of a new
// name (tokens.ts says why not an index on PostgreSQL's lower()). Not unique: a store may hold
// duplicates written before names were unique. The existing rows get their key from migrate
// (tokens.ts fillNameKeys), as only JavaScript computes it; a trigger of the rules keeps the
// column right beside a node of an older build (tokens.ts TOKEN_NAME_KEY_TRIGGER).
const V_TOKEN_NAME_KEY = `
ALTER TABLE tokens ADD COLUMN name_key text;
CREATE INDEX tokens_name_key ON tokens (name_key);
`;

export const MIGRATIONS: readonly { version: number; sql: string }[] = [
  { version: 1, sql: V1 },
  { version: 2, sql: V_SIGNING_KEYS },
  { version: 3, sql: V_RETENTION },
  { version: 4, sql: V_KEY_REVOCATION },
  { version: 5, sql: V_DEVICE_SESSIONS },
  { version: 6, sql: V_TOKEN_NAME_KEY },
];
