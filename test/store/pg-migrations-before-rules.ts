// FIXTURE, not a rule: the migration list as it stood before the stored functions moved beside
// their jobs (commit 3ac8b82, src/store/pg/migrations.ts, versions 1-5, copied verbatim below
// the markers). test/store/pg-rules.test.ts builds a database with it, as a node of that
// release left it, then opens it with this build. Never edit: it is what such databases hold.

// Schema migrations of the PostgreSQL store, applied in order under an advisory lock (so
// several nodes starting at once apply each exactly once). Never edit an applied entry:
// append a new one.
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

-- The reservation: idempotency lookup, token re-check, quota check and the charge in one
-- call, so a hot token's counter rows are locked for one round trip only. READ COMMITTED
-- with row locks is enough: the three counter rows are locked in a fixed order by the
-- upsert before the check; the key claim is an INSERT ... ON CONFLICT DO NOTHING on the
-- primary key. Nothing is written unless the request is admitted (bar empty counter rows).
CREATE FUNCTION lv_reserve(
  p_token text, p_module text, p_units integer, p_request text, p_key text, p_fp text,
  p_at_ms bigint, p_created text, p_day text, p_month text,
  p_rsv text, p_led text, p_node text
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  rec idempotency%ROWTYPE;
  held text;
  tok jsonb;
  g jsonb;
  used_now bigint;
BEGIN
  IF p_key IS NOT NULL THEN
    SELECT * INTO rec FROM idempotency WHERE token_id = p_token AND key = p_key;
    IF FOUND THEN
      IF rec.fingerprint <> p_fp THEN RETURN jsonb_build_object('kind', 'error', 'code', 'idempotency_conflict'); END IF;
      IF rec.state = 'pending' THEN
        SELECT state INTO held FROM reservations WHERE id = rec.reservation_id;
        IF held = 'settlement_failed' THEN RETURN jsonb_build_object('kind', 'error', 'code', 'settlement_failed'); END IF;
        RETURN jsonb_build_object('kind', 'error', 'code', 'request_in_progress');
      END IF;
      RETURN jsonb_build_object('kind', 'replay', 'status', rec.status, 'body', rec.body);
    END IF;
  END IF;
  -- the token is read again here: it may have been revoked or re-granted during the upload
  SELECT record INTO tok FROM tokens WHERE id = p_token;
  IF NOT FOUND THEN RETURN jsonb_build_object('kind', 'error', 'code', 'invalid_token'); END IF;
  IF NOT (tok->>'enabled')::boolean OR (tok->>'revoked')::boolean
     OR (tok->>'expires_at' IS NOT NULL AND (extract(epoch FROM (tok->>'expires_at')::timestamptz) * 1000) <= p_at_ms) THEN
    RETURN jsonb_build_object('kind', 'error', 'code', 'invalid_token');
  END IF;
  SELECT x INTO g FROM jsonb_array_elements(tok->'grants') x WHERE x->>'module_id' = p_module;
  IF NOT FOUND THEN RETURN jsonb_build_object('kind', 'error', 'code', 'module_forbidden'); END IF;
  INSERT INTO counters AS c (token_id, module_id, period, win, used)
    VALUES (p_token, p_module, 'day', p_day, 0), (p_token, p_module, 'month', p_month, 0), (p_token, p_module, 'never', 'all', 0)
    ON CONFLICT (token_id, module_id, period, win) DO UPDATE SET used = c.used;
  SELECT used INTO used_now FROM counters
    WHERE token_id = p_token AND module_id = p_module AND period = g->>'period'
      AND win = CASE g->>'period' WHEN 'day' THEN p_day WHEN 'month' THEN p_month ELSE 'all' END;
  IF g->'limit' <> 'null'::jsonb AND used_now + p_units > (g->>'limit')::bigint THEN
    RETURN jsonb_build_object('kind', 'error', 'code', 'quota_exceeded', 'used', used_now, 'grant', g);
  END IF;
  IF p_key IS NOT NULL THEN
    INSERT INTO idempotency (token_id, key, state, fingerprint, request_id, reservation_id, created_at)
      VALUES (p_token, p_key, 'pending', p_fp, p_request, p_rsv, p_created)
      ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
      -- a request with the same key was admitted since the lookup above: answer as if it
      -- had been seen there (nothing written by this call)
      RETURN jsonb_build_object('kind', 'retry');
    END IF;
  END IF;
  UPDATE counters SET used = used + p_units
    WHERE token_id = p_token AND module_id = p_module
      AND (period, win) IN (('day', p_day), ('month', p_month), ('never', 'all'));
  INSERT INTO ledger (id, at_ms, request_id, token_id, module_id, units, kind, day, month, reservation_id)
    VALUES (p_led, p_at_ms, p_request, p_token, p_module, p_units, 'charge', p_day, p_month, p_rsv);
  INSERT INTO reservations (id, request_id, token_id, module_id, units, state, day, month, created_at, node_id, idempotency_key)
    VALUES (p_rsv, p_request, p_token, p_module, p_units, 'pending', p_day, p_month, p_created, p_node, p_key);
  RETURN jsonb_build_object('kind', 'reserved');
END $$;

-- The usage array of a token as JSON text, byte for byte what JSON.stringify makes of the
-- service's usage records (the body is replayed byte for byte, so its form is fixed).
CREATE FUNCTION lv_usage_json(p_token text, p_day text, p_month text, p_reset_day text, p_reset_month text)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT '[' || coalesce(string_agg(
    '{"module_id":' || to_json(g->>'module_id')::text
    || ',"limit":' || CASE WHEN g->'limit' = 'null'::jsonb THEN 'null' ELSE (g->>'limit') END
    || ',"period":' || to_json(g->>'period')::text
    || ',"used":' || u.used::text
    || ',"remaining":' || CASE WHEN g->'limit' = 'null'::jsonb THEN 'null' ELSE greatest(0, (g->>'limit')::bigint - u.used)::text END
    || ',"reset_at":' || CASE g->>'period' WHEN 'day' THEN to_json(p_reset_day)::text WHEN 'month' THEN to_json(p_reset_month)::text ELSE 'null' END
    || '}', ',' ORDER BY n), '') || ']'
  FROM tokens t,
       jsonb_array_elements(t.record->'grants') WITH ORDINALITY AS e(g, n),
       LATERAL (SELECT coalesce((SELECT c.used FROM counters c
                  WHERE c.token_id = t.id AND c.module_id = g->>'module_id' AND c.period = g->>'period'
                    AND c.win = CASE g->>'period' WHEN 'day' THEN p_day WHEN 'month' THEN p_month ELSE 'all' END), 0) AS used) u
  WHERE t.id = p_token
$$;

-- The settlement in one call: pending -> charged (refused when the holder's lease lapsed:
-- another node may already be refunding it), the key completed with the body whose usage
-- placeholder is replaced by the usage as of this moment, and the result stored.
CREATE FUNCTION lv_settle(
  p_rsv text, p_at_ms bigint, p_iso text, p_body text, p_marker text, p_result jsonb,
  p_day text, p_month text, p_reset_day text, p_reset_month text
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
  text_body text;
BEGIN
  UPDATE reservations SET state = 'charged', settled_at = p_iso, settled_ms = p_at_ms
    WHERE id = p_rsv AND state = 'pending'
      AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = reservations.node_id AND n.lease_until > now())
    RETURNING * INTO r;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('ok', false, 'state', (SELECT state FROM reservations WHERE id = p_rsv));
  END IF;
  text_body := replace(p_body, p_marker, lv_usage_json(r.token_id, p_day, p_month, p_reset_day, p_reset_month));
  IF r.idempotency_key IS NOT NULL THEN
    UPDATE idempotency SET state = 'completed', completed_at = p_iso, completed_ms = p_at_ms, status = 200, body = text_body
      WHERE token_id = r.token_id AND key = r.idempotency_key;
  END IF;
  INSERT INTO results (request_id, record) VALUES (r.request_id, p_result) ON CONFLICT (request_id) DO NOTHING;
  RETURN jsonb_build_object('ok', true, 'body', text_body);
END $$;

-- Gives held units back: the ledger's UNIQUE (reservation, kind) makes a second refund of
-- the same reservation impossible, whoever tries it.
CREATE FUNCTION lv_refund_held(r reservations, p_at_ms bigint, p_iso text, p_led text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO ledger (id, at_ms, request_id, token_id, module_id, units, kind, day, month, reservation_id)
    VALUES (p_led, p_at_ms, r.request_id, r.token_id, r.module_id, r.units, 'refund', r.day, r.month, r.id);
  UPDATE counters SET used = used - r.units
    WHERE token_id = r.token_id AND module_id = r.module_id
      AND (period, win) IN (('day', r.day), ('month', r.month), ('never', 'all'));
  IF r.idempotency_key IS NOT NULL THEN
    DELETE FROM idempotency WHERE token_id = r.token_id AND key = r.idempotency_key AND reservation_id = r.id AND state = 'pending';
  END IF;
END $$;

CREATE FUNCTION lv_refund(p_rsv text, p_at_ms bigint, p_iso text, p_led text) RETURNS SETOF reservations LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
BEGIN
  UPDATE reservations SET state = 'refunded', settled_at = p_iso, settled_ms = p_at_ms, unsaved_body = NULL
    WHERE id = p_rsv AND state IN ('pending', 'settlement_failed')
    RETURNING * INTO r;
  IF FOUND THEN
    PERFORM lv_refund_held(r, p_at_ms, p_iso, p_led);
    RETURN NEXT r;
  ELSE
    RETURN QUERY SELECT * FROM reservations WHERE id = p_rsv;
  END IF;
END $$;

-- Crash recovery without pids: pending reservations of nodes whose lease expired (database
-- clock) are refunded by whichever node sweeps first; SKIP LOCKED lets sweepers and
-- late settlements pass each other instead of queueing.
CREATE FUNCTION lv_sweep_expired(p_at_ms bigint, p_iso text) RETURNS SETOF reservations LANGUAGE plpgsql AS $$
DECLARE
  r reservations%ROWTYPE;
BEGIN
  FOR r IN
    UPDATE reservations SET state = 'refunded', settled_at = p_iso, settled_ms = p_at_ms
      WHERE id IN (
        SELECT x.id FROM reservations x JOIN nodes n ON n.id = x.node_id
          WHERE x.state = 'pending' AND n.lease_until <= now()
          FOR UPDATE OF x SKIP LOCKED)
      RETURNING *
  LOOP
    PERFORM lv_refund_held(r, p_at_ms, p_iso, 'led_' || md5(r.id || ':refund'));
    RETURN NEXT r;
  END LOOP;
END $$;
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

// Device sessions (issue 26, src/store/pg/device-sessions.ts). lv_reserve itself is untouched:
// a call made with a session goes through lv_reserve_session, which locks the session's row
// (so its calls queue and cannot pass max_captures together), runs lv_reserve, and when that
// admits the call checks the session in the same transaction; a refusal raises, which rolls
// back lv_reserve's writes, so nothing is charged. Idempotent replays come from lv_reserve
// before any admission, so a device retrying with its key replays even when the session is
// used up. A reservation that becomes refunded, whoever refunds it (lv_refund, the lease
// sweep), gives its captures back to the session through the trigger.
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

-- The rate check and the insert under a per-token transaction lock, so concurrent mints on
-- any node queue instead of both taking the last place; answers the window's creation times
-- when refused (the caller works out Retry-After from them).
CREATE FUNCTION lv_mint_session(
  p_id text, p_hash text, p_token text, p_module text, p_created text, p_created_ms bigint,
  p_expires text, p_expires_ms bigint, p_max integer, p_limit integer, p_window_ms bigint
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  recent bigint[];
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('lv_mint_session:' || p_token));
  SELECT coalesce(array_agg(created_ms ORDER BY created_ms), '{}') INTO recent
    FROM device_sessions WHERE token_id = p_token AND created_ms > p_created_ms - p_window_ms;
  IF cardinality(recent) >= p_limit THEN
    RETURN jsonb_build_object('created', false, 'recent', to_jsonb(recent));
  END IF;
  INSERT INTO device_sessions (id, hash, token_id, module_id, created_at, created_ms, expires_at, expires_ms, max_captures)
    VALUES (p_id, p_hash, p_token, p_module, p_created, p_created_ms, p_expires, p_expires_ms, p_max);
  RETURN jsonb_build_object('created', true);
END $$;

CREATE FUNCTION lv_reserve_session(
  p_session text,
  p_token text, p_module text, p_units integer, p_request text, p_key text, p_fp text,
  p_at_ms bigint, p_created text, p_day text, p_month text,
  p_rsv text, p_led text, p_node text
) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  s device_sessions%ROWTYPE;
  r jsonb;
BEGIN
  SELECT * INTO s FROM device_sessions WHERE id = p_session FOR UPDATE;
  BEGIN
    r := lv_reserve(p_token, p_module, p_units, p_request, p_key, p_fp, p_at_ms, p_created, p_day, p_month, p_rsv, p_led, p_node);
    IF r->>'kind' = 'reserved' THEN
      IF s.id IS NULL OR s.token_id <> p_token OR s.revoked_at IS NOT NULL OR s.expires_ms <= p_at_ms THEN
        RAISE EXCEPTION 'session unusable' USING ERRCODE = 'LV001';
      END IF;
      IF s.captures_used + p_units > s.max_captures THEN
        RAISE EXCEPTION 'session captures exceeded' USING ERRCODE = 'LV002';
      END IF;
      UPDATE device_sessions SET captures_used = captures_used + p_units WHERE id = p_session;
      INSERT INTO device_session_calls (reservation_id, session_id, request_id, units, at, at_ms)
        VALUES (p_rsv, p_session, p_request, p_units, p_created, p_at_ms);
    END IF;
    RETURN r;
  EXCEPTION
    WHEN SQLSTATE 'LV001' THEN
      RETURN jsonb_build_object('kind', 'error', 'code', 'invalid_session_token');
    WHEN SQLSTATE 'LV002' THEN
      RETURN jsonb_build_object('kind', 'error', 'code', 'session_captures_exceeded', 'used', s.captures_used, 'max', s.max_captures);
  END;
END $$;

CREATE FUNCTION lv_session_refund() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c device_session_calls%ROWTYPE;
BEGIN
  UPDATE device_session_calls SET refunded = true WHERE reservation_id = NEW.id AND NOT refunded RETURNING * INTO c;
  IF FOUND THEN
    UPDATE device_sessions SET captures_used = greatest(0, captures_used - c.units) WHERE id = c.session_id;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER reservations_session_refund AFTER UPDATE OF state ON reservations
  FOR EACH ROW WHEN (NEW.state = 'refunded' AND OLD.state IS DISTINCT FROM 'refunded')
  EXECUTE FUNCTION lv_session_refund();
`;

export const MIGRATIONS_BEFORE_RULES: readonly { version: number; sql: string }[] = [
  { version: 1, sql: V1 },
  { version: 2, sql: V_SIGNING_KEYS },
  { version: 3, sql: V_RETENTION },
  { version: 4, sql: V_KEY_REVOCATION },
  { version: 5, sql: V_DEVICE_SESSIONS },
];
