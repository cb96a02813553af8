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

export const MIGRATIONS: readonly { version: number; sql: string }[] = [
  { version: 1, sql: V1 },
  { version: 2, sql: V_SIGNING_KEYS },
  { version: 3, sql: V_RETENTION },
  { version: 4, sql: V_KEY_REVOCATION },
];
