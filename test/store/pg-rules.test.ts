import t, { type Test } from 'tap';
import pg from 'pg';
import { PgBackend } from '../../src/store/pg/index.ts';
import type { SettlementResolved } from '../../src/store/pg/open.ts';
import { MIGRATIONS } from '../../src/store/pg/migrations.ts';
import { FUNCTIONS, RULES_VERSION, rulesDigest, TRIGGERS } from '../../src/store/pg/rules.ts';
import { windowsOf } from '../../src/store/pg/usage.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { T0, tokenRecord } from './contract.ts';
import { MIGRATIONS_BEFORE_RULES } from './pg-migrations-before-rules.ts';

// PostgreSQL's rules (stored functions, the session trigger) live beside their jobs
// (src/store/pg/reserve.ts, settle.ts, recovery.ts, device-sessions.ts) and are installed at
// every start (src/store/pg/rules.ts); the migrations create tables only. Until then the
// migrations created the functions: a database of that release must keep working, and hold
// exactly what a new one holds once this build has started on it.

/** The digest of the rules' text for each RULES_VERSION. A rule's text changed: raise
 * RULES_VERSION in src/store/pg/rules.ts and add its digest here (older nodes then refuse to
 * start on the database rather than put their rules back). */
const DIGESTS: Record<number, string> = {
  1: 'ad91e75c93f0b4d62545d837d7fb9ab7ffe0fbaadc9a99c77517e23165beec99',
  // lv_reserve and lv_reserve_session refuse a dead token, grant or session before the key, and
  // lv_reserve looks the key up again once the counters are locked; lv_refund_held locks the
  // counters in lv_reserve's order; lv_sweep_expired takes reservations whose node row is gone
  2: 'bd28ae52784ef1bac763c46145b6fceb875383bfa2155f9226aecba77c37c5b1',
  // lv_sweep_expired takes only the nodes (and lease values) its caller watched lapse for a
  // lease of its own time, not every lapsed lease (a forward step of the database's clock);
  // lv_mint_session does not count sessions stamped after the mint's time (a clock stepped back)
  3: '00eaecc01d008f2a94e95f01e8fb2737069c58c5c1ddb88c852f55eaa01bf26e',
  // lv_token_name_key_kept and its trigger: a token renamed by an older build loses its name
  // key (src/store/pg/tokens.ts), as that build writes the record alone
  4: '01d55371dea2a3c6fd57df64f33a2bd8f6ddd63baed1a8e2a8fea3f5d911e8ac',
};

/** The functions whose text changed after the move into rules.ts (version 1), by version. */
const CHANGED_SINCE_MOVE: Record<number, string[]> = { 2: ['lv_reserve', 'lv_reserve_session', 'lv_refund_held', 'lv_sweep_expired'], 3: ['lv_sweep_expired', 'lv_mint_session'], 4: ['lv_token_name_key_kept'] };
/** The triggers added after the move, by version (the previous release had none of them). */
const ADDED_TRIGGERS_SINCE_MOVE: Record<number, string[]> = { 4: ['tokens_name_key_kept'] };

const server = await startPostgres();
t.teardown(() => server.stop());

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A database as a node of the previous release left it, migrated up to `upTo` (that
 * release's migrate(): each entry in its transaction, recorded in schema_migrations). */
async function previousRelease(name: string, upTo: number): Promise<string> {
  const url = await server.database(name);
  await withClient(url, async (c) => {
    await c.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    for (const m of MIGRATIONS_BEFORE_RULES.filter((m) => m.version <= upTo)) {
      await c.query('BEGIN');
      await c.query(m.sql);
      await c.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
      await c.query('COMMIT');
    }
  });
  return url;
}

/** What a database holds, as PostgreSQL prints it back. */
async function catalog(url: string) {
  return withClient(url, async (c) => {
    const rows = async (sql: string) => (await c.query(sql)).rows.map((r: Record<string, unknown>) => Object.values(r).join(' | '));
    return {
      functions: await rows(`SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema() ORDER BY p.proname`),
      triggers: await rows(`SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT t.tgisinternal ORDER BY t.tgname`),
      columns: await rows(`SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`),
      indexes: await rows(`SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`),
      constraints: await rows(`SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = current_schema() ORDER BY 1, 2`),
    };
  });
}

async function openAndClose(url: string, opts: Parameters<typeof PgBackend.open>[1] = {}): Promise<number[]> {
  const store = await PgBackend.open(url, opts);
  const applied = store.applied;
  await store.close();
  return applied;
}

const fresh = await server.database('fresh');
await openAndClose(fresh);
const FRESH = await catalog(fresh);
/** the functions' names, as FUNCTIONS creates them */
const NAMES = FUNCTIONS.map((sql) => /^CREATE OR REPLACE FUNCTION (\w+)\(/.exec(sql)![1]!).sort();

t.test('the migrations create tables only; the rules are the functions and triggers of rules.ts, and nothing else', async (t) => {
  for (const m of MIGRATIONS) t.notMatch(m.sql, /CREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|TRIGGER)/i, `migration ${m.version} creates no function or trigger`);
  t.same(FRESH.functions.map((f) => f.split(' | ')[0]), NAMES, 'a new database has exactly the functions of rules.ts');
  t.same(FRESH.triggers.map((f) => f.split(' | ')[0]), TRIGGERS.map((x) => x.name).sort(), 'and its triggers');
  t.equal(rulesDigest(), DIGESTS[RULES_VERSION], 'a rule\'s text changed: raise RULES_VERSION (src/store/pg/rules.ts) and pin its digest in DIGESTS above');
});

t.test('no rule changed in the move: the previous release\'s migrations made the very functions and trigger this build installs', async (t) => {
  const before = await catalog(await previousRelease('before_rules', 5));
  const changed = new Set(Object.entries(CHANGED_SINCE_MOVE).filter(([v]) => Number(v) <= RULES_VERSION).flatMap(([, names]) => names));
  const unchanged = (fs: string[]) => fs.filter((f) => !changed.has(f.split(' | ')[0]!));
  t.same(unchanged(before.functions), unchanged(FRESH.functions), 'every function, as pg_get_functiondef prints it (but those changed since, by RULES_VERSION)');
  t.equal(unchanged(FRESH.functions).length, FRESH.functions.length - changed.size, 'the changed ones are there, by name');
  const added = new Set(Object.entries(ADDED_TRIGGERS_SINCE_MOVE).filter(([v]) => Number(v) <= RULES_VERSION).flatMap(([, names]) => names));
  t.same(before.triggers, FRESH.triggers.filter((x) => !added.has(x.split(' | ')[0]!)), 'the triggers it had, unchanged');
});

t.test('a database of the previous release opens with this build, at any of its versions: the same tables, functions and trigger as a new one', async (t) => {
  for (const upTo of MIGRATIONS_BEFORE_RULES.map((m) => m.version)) {
    const url = await previousRelease(`upgrade_from_${upTo}`, upTo);
    const applied = await openAndClose(url);
    t.same(applied, MIGRATIONS.map((m) => m.version).filter((v) => v > upTo), `from version ${upTo}: the migrations it lacked`);
    t.same(await catalog(url), FRESH, `from version ${upTo}: the same database as a new one`);
  }
});

t.test('reservations made by the previous release\'s functions are refunded by this build\'s, captures given back through the trigger', async (t) => {
  const url = await previousRelease('in_flight', 5);
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  const at = T0;
  const iso = new Date(at).toISOString();
  const w = windowsOf(at);
  const session = 'ses_in_flight';
  // as the previous release's node would have left them: a live node whose call is in flight,
  // and a dead one (lease lapsed) that held another, both made with one device session
  await withClient(url, async (c) => {
    await c.query('INSERT INTO tokens (id, hash, record, created_at) VALUES ($1, $2, $3, $4)', [tok.id, tok.hash, tok, tok.created_at]);
    await c.query(`INSERT INTO nodes (id, info, lease_until) VALUES ('node_live', '{}', now() + interval '1 hour'), ('node_dead', '{}', now() - interval '1 second')`);
    const minted = (await c.query('SELECT lv_mint_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) AS r', [session, 'hash_in_flight', tok.id, 'rgb_liveness', iso, at, new Date(at + 3_600_000).toISOString(), at + 3_600_000, 5, 10, 60_000])).rows[0]!.r;
    t.same(minted, { created: true });
    for (const [rsv, node, key] of [['rsv_live', 'node_live', 'k-live'], ['rsv_dead', 'node_dead', 'k-dead']] as const) {
      const r = (await c.query('SELECT lv_reserve_session($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) AS r', [
        session, tok.id, 'rgb_liveness', 2, `req_${rsv}`, key, 'fp', at, iso, w.day, w.month, rsv, `led_${rsv}`, node,
      ])).rows[0]!.r;
      t.same(r, { kind: 'reserved' }, `${rsv} reserved by the previous release`);
    }
  });
  // a short lease: the sweep takes a lease it has watched lapsed, unrenewed, for a whole lease
  const leaseMs = 200;
  const store = await PgBackend.open(url, { leaseMs });
  t.teardown(() => store.close());
  t.equal((await store.getDeviceSession(session))!.captures_used, 4);
  t.same(await store.recoverPending(at + 1), [], 'the first sweep only watches the lapsed lease');
  await new Promise((r) => setTimeout(r, leaseMs + 50));
  const swept = await store.recoverPending(at + 1);
  t.same(swept.map((r) => r.id), ['rsv_dead'], 'the sweep refunds the dead node\'s reservation, not the live one\'s');
  const refunded = await store.refund('rsv_live', at + 2);
  t.equal(refunded?.state, 'refunded', 'the in-flight call\'s refund');
  t.equal((await store.refund('rsv_live', at + 3))?.state, 'refunded', 'a second refund changes nothing');
  t.equal((await store.getDeviceSession(session))!.captures_used, 0, 'both calls\' captures are back on the session');
  t.same((await store.listDeviceSessionCalls(session)).map((c) => c.refunded), [true, true]);
  t.same((await store.listLedger({ token_id: tok.id })).items.map((e) => e.kind).sort(), ['charge', 'charge', 'refund', 'refund'], 'each charge refunded once');
  t.ok((await store.verifyLedger()).ok, 'ledger verify holds');
  const again = await store.reserve({ token: tok, moduleId: 'rgb_liveness', units: 1, requestId: 'req_again', idempotencyKey: 'k-live', fingerprint: 'fp', at: at + 4, sessionId: session });
  t.equal(again.kind, 'reserved', 'the key was released: its retry is a new call');
});

t.test('the rules are installed at every start: a function or trigger changed in the database is put back by the next start', async (t) => {
  const url = await server.database('tampered');
  await openAndClose(url);
  await withClient(url, async (c) => {
    await c.query(`CREATE OR REPLACE FUNCTION lv_refund_held(r reservations, p_at_ms bigint, p_iso text, p_led text) RETURNS void LANGUAGE plpgsql AS $$ BEGIN END $$`);
    await c.query('DROP FUNCTION lv_sweep_expired(bigint, text, text[], bigint[])');
    await c.query(`CREATE OR REPLACE TRIGGER reservations_session_refund AFTER UPDATE OF state ON reservations FOR EACH ROW EXECUTE FUNCTION lv_session_refund()`);
  });
  t.notSame(await catalog(url), FRESH, 'changed');
  await openAndClose(url);
  t.same(await catalog(url), FRESH, 'the next start put every rule back');
  await withClient(url, (c) => c.query('DROP TRIGGER reservations_session_refund ON reservations'));
  await openAndClose(url);
  t.same(await catalog(url), FRESH, 'a trigger dropped is created again');
});

/** each rule's catalog row version (xmin) and its comment's, and the schema_rules row's: a
 * start that writes a rule or its mark changes one of them */
async function ruleRows(url: string) {
  return withClient(url, async (c) => {
    const rows = async (sql: string) => (await c.query(sql)).rows.map((r: Record<string, unknown>) => Object.values(r).join(' | '));
    return {
      functions: await rows(`SELECT p.proname, p.oid, p.xmin, d.xmin AS comment_xmin FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace LEFT JOIN pg_description d ON d.objoid = p.oid AND d.classoid = 'pg_proc'::regclass WHERE n.nspname = current_schema() ORDER BY p.proname`),
      triggers: await rows(`SELECT t.tgname, t.oid, t.xmin, d.xmin AS comment_xmin FROM pg_trigger t LEFT JOIN pg_description d ON d.objoid = t.oid AND d.classoid = 'pg_trigger'::regclass WHERE NOT t.tgisinternal ORDER BY t.tgname`),
      recorded: await rows('SELECT xmin, version, digest, installed_at FROM schema_rules'),
    };
  });
}

t.test('an ordinary start writes no rule: each function, trigger and the recorded version is left as the first start wrote it', async (t) => {
  const url = await server.database('quiet');
  await openAndClose(url);
  const first = await ruleRows(url);
  t.equal(first.functions.length, NAMES.length);
  t.ok(first.functions.every((f) => !f.endsWith(' | ')), 'every function carries its mark');
  await openAndClose(url);
  await openAndClose(url);
  t.same(await ruleRows(url), first, 'two more starts: not one rule, mark or version row written again');
  t.same(await catalog(url), FRESH);
  // one function changed by hand (ALTER keeps its text and comment): only it is put back
  await withClient(url, (c) => c.query('ALTER FUNCTION lv_usage_json(text, text, text, text, text) VOLATILE'));
  await openAndClose(url);
  const after = await ruleRows(url);
  t.same(await catalog(url), FRESH, 'the altered function put back');
  const changed = after.functions.filter((f, i) => f !== first.functions[i]).map((f) => f.split(' | ')[0]);
  t.same(changed, ['lv_usage_json'], 'and nothing else written');
  t.same([after.triggers, after.recorded], [first.triggers, first.recorded]);
});

t.test('a start does not wait for the calls writing reservations: an installed trigger is left as it is', async (t) => {
  const url = await server.database('busy');
  await openAndClose(url);
  const oid = (c: pg.Client) => c.query(`SELECT oid FROM pg_trigger WHERE tgname = 'reservations_session_refund'`).then((r) => r.rows[0]!.oid as number);
  await withClient(url, async (writer) => {
    const before = await oid(writer);
    // a transaction writing reservations, left open (a call in flight on another node)
    await writer.query('BEGIN');
    await writer.query(`INSERT INTO nodes (id, info, lease_until) VALUES ('node_busy', '{}', now() + interval '1 hour')`);
    await writer.query(`INSERT INTO reservations (id, request_id, token_id, module_id, units, state, day, month, created_at, node_id) VALUES ('rsv_busy', 'req', 'tok', 'rgb_liveness', 1, 'pending', '2026-05-04', '2026-05', 'x', 'node_busy')`);
    // the trigger's replacement would queue behind this transaction: the statement timeout
    // would then fail the start
    await t.resolves(openAndClose(url, { statementTimeoutMs: 3_000 }), 'the start went through');
    await writer.query('ROLLBACK');
    t.equal(await oid(writer), before, 'the same trigger');
  });
});

t.test('a database whose rules are newer than this build\'s is refused, and its rules are left alone', async (t) => {
  const url = await server.database('newer_rules');
  await openAndClose(url);
  const newer = RULES_VERSION + 1;
  const row = await withClient(url, async (c) => {
    await c.query('UPDATE schema_rules SET version = $1', [newer]);
    return (await c.query('SELECT * FROM schema_rules')).rows;
  });
  await t.rejects(PgBackend.open(url), { message: new RegExp(`database rules version ${newer} is newer than this build's ${RULES_VERSION}`) });
  t.same(await withClient(url, async (c) => (await c.query('SELECT * FROM schema_rules')).rows), row, 'nothing installed');
});

// review3 (upgrades): two builds of one rules version with different rule texts (version 2 had
// two, its digest re-pinned in DIGESTS) each put their own text back at every start, under
// the other's running nodes. A digest of this version other than this build's is refused.
t.test('rules of this version but another text are refused, and left alone', async (t) => {
  const url = await server.database('other_text_rules');
  await openAndClose(url);
  const row = await withClient(url, async (c) => {
    await c.query('UPDATE schema_rules SET digest = $1', ['0'.repeat(64)]);
    return (await c.query('SELECT * FROM schema_rules')).rows;
  });
  await t.rejects(PgBackend.open(url), { message: new RegExp(`database rules version ${RULES_VERSION} were installed by a build whose rules differ from this build's \\(digest 000000000000, this build ${rulesDigest().slice(0, 12)}\\)`) });
  t.same(await withClient(url, async (c) => (await c.query('SELECT * FROM schema_rules')).rows), row, 'nothing installed');
});

// The refund paths only PostgreSQL has, or that no server test produces on it
// (docs/metering.md "Every refund path" names the tests of the others).

/** a store on a database of its own, with a token; `setup` runs as the superuser first */
async function storeWith(t: Test, name: string, setup: string, opts: Parameters<typeof PgBackend.open>[1] = {}) {
  const url = await server.database(name);
  await openAndClose(url);
  await withClient(url, (c) => c.query(setup));
  const store = await PgBackend.open(url, { leaseMs: 60_000, ...opts });
  t.teardown(() => store.close());
  const tok = tokenRecord([{ module_id: 'rgb_liveness', limit: 10, period: 'never' }]);
  await store.insertToken(tok);
  const reserve = async (requestId: string, key: string | null, at = T0) => {
    const out = await store.reserve({ token: tok, moduleId: 'rgb_liveness', units: 1, requestId, idempotencyKey: key, fingerprint: key && 'fp', at });
    if (out.kind !== 'reserved') throw new Error(`not reserved: ${out.kind}`);
    return out.reservation;
  };
  const used = async () => (await store.usageSnapshot(tok, T0 + 10))[0]!.used;
  return { url, store, reserve, used };
}

t.test('a settlement the database cannot write (disk_full): refunded at once, or once writes work again', async (t) => {
  // the settlement's UPDATE fails as a full disk fails it (SQLSTATE 53100); for req_full_twice
  // the refund's too, until the trigger is dropped (space came back)
  const { url, store, reserve, used } = await storeWith(t, 'disk_full', `
    CREATE FUNCTION test_full() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.request_id LIKE 'req_full%' AND (NEW.state = 'charged' OR NEW.request_id = 'req_full_twice') THEN
        RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_full BEFORE UPDATE OF state ON reservations FOR EACH ROW EXECUTE FUNCTION test_full()`);
  const once = await reserve('req_full_once', 'k-full');
  t.match(await store.settle(once, T0 + 1, () => '{}', []), { kind: 'not_recorded', refund: 'refunded' });
  t.equal((await store.getReservation(once.id))!.state, 'refunded');
  t.ok(await reserve('req_after', 'k-full', T0 + 2), 'its key is free: the retry is reserved');
  const twice = await reserve('req_full_twice', null);
  t.match(await store.settle(twice, T0 + 3, () => '{}', []), { kind: 'not_recorded', refund: 'refund_deferred' });
  t.equal((await store.getReservation(twice.id))!.state, 'pending', 'held until the refund can be written');
  t.equal(store.pendingRepairs(), 1, 'the refund is owed');
  await withClient(url, (c) => c.query('DROP TRIGGER test_full ON reservations'));
  t.ok(await store.renew(), 'the lease renewal makes the writes owed');
  t.equal(store.pendingRepairs(), 0);
  t.equal((await store.getReservation(twice.id))!.state, 'refunded');
  t.equal(await used(), 1, 'only req_after holds a unit');
  t.ok((await store.verifyLedger()).ok);
});

t.test('a settlement whose connection broke before it committed: refunded without a key, settled with one', async (t) => {
  // the settlement's own connection is terminated inside its transaction (as a failover or a
  // restart cuts it), the first two times only; the store resolves it at once on another
  const resolved: SettlementResolved[] = [];
  const { store, reserve, used } = await storeWith(t, 'cut', `
    CREATE SEQUENCE test_cuts;
    CREATE FUNCTION test_cut() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('test_cuts') <= 2 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_cut BEFORE UPDATE OF state ON reservations FOR EACH ROW WHEN (NEW.state = 'charged') EXECUTE FUNCTION test_cut()`,
  { onSettlementResolved: (r) => resolved.push(r) });
  const keyless = await reserve('req_cut_keyless', null);
  t.match(await store.settle(keyless, T0 + 1, () => '{"answer":1}', []), { kind: 'refused', refunded: true }, 'answered as not charged, refunded by this call');
  t.equal((await store.getReservation(keyless.id))!.state, 'refunded', 'its units given back: the client\'s retry is a new call');
  const keyed = await reserve('req_cut_keyed', 'k-cut');
  t.match(await store.settle(keyed, T0 + 2, () => '{"answer":2}', []), { kind: 'settled', body: '{"answer":2}' }, 'with a key: settled now, the answer saved on it');
  t.equal((await store.getReservation(keyed.id))!.state, 'charged');
  t.same(resolved, [
    { reservation: keyless.id, outcome: 'refunded', already: false },
    { reservation: keyed.id, outcome: 'charged', already: false },
  ]);
  t.equal(await used(), 1, 'one unit charged, the other refunded');
  t.ok((await store.verifyLedger()).ok);
});

t.test('a refused settlement says whether its own refund gave the units back (the metrics count them where the ledger entry was written)', async (t) => {
  const { url, store, reserve, used } = await storeWith(t, 'refused_refunds', 'SELECT 1');
  // its node's lease lapsed: refused, and refunded by this call
  const lapsed = await reserve('req_lapsed', null);
  // as the node knows it too (an outage outlasted the lease); one lapsed only in the database,
  // by its clock stepping forward, is renewed and its settlement made (pg-clock-step.test.ts)
  await withClient(url, (c) => c.query(`UPDATE nodes SET lease_until = now() - interval '1 second' WHERE id = $1`, [store.node]));
  (store as unknown as { db: { leaseOkUntil: number } }).db.leaseOkUntil = performance.now() - 1;
  t.match(await store.settle(lapsed, T0 + 1, () => '{}', []), { kind: 'refused', refunded: true }, 'refunded here');
  t.ok(await store.renew(), 'the lease renewed');
  // already refunded by another (a sweep that got there first): refused, not refunded again
  const swept = await reserve('req_swept', null);
  await store.refund(swept.id, T0 + 2);
  t.match(await store.settle(swept, T0 + 3, () => '{}', []), { kind: 'refused', refunded: false }, 'refunded elsewhere: not counted here');
  t.same((await store.listLedger({})).items.filter((e) => e.kind === 'refund').length, 2, 'one refund entry each');
  t.equal(await used(), 0);
  t.ok((await store.verifyLedger()).ok);
});
