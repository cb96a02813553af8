import { createHash } from 'node:crypto';
import type pg from 'pg';
import { RESERVE_RULES } from './reserve.ts';
import { SETTLE_RULES } from './settle.ts';
import { RECOVERY_RULES } from './recovery.ts';
import { SESSION_REFUND_TRIGGER, SESSION_RULES } from './device-sessions.ts';
import { TOKEN_NAME_KEY_RULES, TOKEN_NAME_KEY_TRIGGER } from './tokens.ts';

// PostgreSQL's metering rules run as stored functions, so each is one round trip under its row
// locks. Each is written in the file of the job that calls it (settle.ts holds lv_settle and
// lv_refund as lmdb/settle.ts holds LMDB's settlement and refund) and installed here: every
// start checks them under the migration lock (migrate.ts), after the migrations (which create
// tables only), and installs each one the database lacks or holds otherwise than this build
// wrote it: changing a rule is an edit of its text in its job's file, and the next node to
// start installs it. The role of DATABASE_URL must own the functions (it already creates the tables).

/** Raise with every change of a rule's text (test/store/pg-rules.test.ts pins the text's digest
 * for each version, and fails until both are raised): a node of an older build refuses to start
 * on a database whose rules are newer, rather than putting its older rules back under the newer
 * nodes, as a database whose schema is newer is refused. */
export const RULES_VERSION = 4;

/** Functions of earlier rules whose arguments changed, dropped at install: CREATE OR REPLACE of
 * other arguments makes another function beside the old one, which a node of an older build,
 * still running, would go on calling (version 3: lv_sweep_expired takes the nodes its caller
 * watched lapse; the old one swept every lapsed lease, a live node's after a clock step too). */
export const RETIRED_FUNCTIONS: readonly string[] = ['lv_sweep_expired(bigint, text)'];

/** the functions, in the order they are installed */
export const FUNCTIONS: readonly string[] = [...SETTLE_RULES, ...RESERVE_RULES, ...RECOVERY_RULES, ...SESSION_RULES, ...TOKEN_NAME_KEY_RULES];

interface Trigger {
  readonly name: string;
  readonly table: string;
  /** CREATE OR REPLACE TRIGGER ... */
  readonly sql: string;
}

/** installed after the functions they execute */
export const TRIGGERS: readonly Trigger[] = [SESSION_REFUND_TRIGGER, TOKEN_NAME_KEY_TRIGGER];

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** the digest of every rule's text, as installed */
export function rulesDigest(): string {
  return sha256([...FUNCTIONS, ...TRIGGERS.map((t) => t.sql)].join('\n;\n'));
}

/** Where the version of the rules installed is kept (one row), beside schema_migrations. */
export const RULES_TABLE = `CREATE TABLE IF NOT EXISTS schema_rules (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  version integer NOT NULL,
  digest text NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now()
)`;

/** The version of the rules the database holds; 0 before any was recorded (a database of the
 * builds whose migrations held the rules, or a new one). */
/** The version and digest of the rules the database holds (0 and null before any). */
export async function installedRules(c: pg.PoolClient): Promise<{ version: number; digest: string | null }> {
  const row = (await c.query('SELECT version, digest FROM schema_rules')).rows[0] as { version: number; digest: string } | undefined;
  return { version: row?.version ?? 0, digest: row?.digest ?? null };
}

/** Why this build must not install its rules over the database's, or null. Newer rules are
 * never replaced by older ones. Rules of this very version but another text were installed by
 * a build that changed a rule without raising RULES_VERSION (it happened once: two texts of
 * version 2, review3): each build of the pair would put its own text back whenever it started,
 * under the other's running nodes, silently undoing the other's fixes. So that is refused too,
 * both ways, naming the digests: run one of the two builds, or a build with newer rules. */
export function rulesRefusal(installed: { version: number; digest: string | null }): string | null {
  if (installed.version > RULES_VERSION) return `database rules version ${installed.version} is newer than this build's ${RULES_VERSION}`;
  if (installed.version === RULES_VERSION && installed.digest !== null && installed.digest !== rulesDigest()) {
    return `database rules version ${RULES_VERSION} were installed by a build whose rules differ from this build's (digest ${installed.digest.slice(0, 12)}, this build ${rulesDigest().slice(0, 12)}): two builds disagree on the rules of one version; start the build that installed them, or one with newer rules`;
  }
  return null;
}

/** An installed rule's comment: the text that installed it and what PostgreSQL made of it
 * (pg_get_functiondef, pg_get_triggerdef), so one changed since (even by CREATE OR REPLACE,
 * which keeps the comment, or ALTER) no longer matches its mark. */
const markOf = (text: string, def: string) => `liveness-service rule: text sha256 ${sha256(text)}, definition sha256 ${sha256(def)}`;

/** the name a function's text creates */
export function functionName(sql: string): string {
  return /^CREATE OR REPLACE FUNCTION (\w+)\(/.exec(sql)![1]!;
}

/** the functions of these names in the current schema, with their comment and definition */
const INSTALLED_FUNCTIONS = `SELECT p.proname AS name, p.oid::regprocedure::text AS signature, obj_description(p.oid, 'pg_proc') AS mark, pg_get_functiondef(p.oid) AS def
  FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.proname = ANY($1)`;

/** Installs what differs of this build's rules, in one transaction, so a node sees all of them
 * or none. The caller holds the migration lock and has checked that the database's rules are
 * not newer. A rule whose mark matches is left as it is: every API worker of every node and
 * every CLI command opens the store, and replacing the functions at each start made each of
 * those a catalog write under the lock, and made every pooled connection of every node compile
 * them again at its next call. So an ordinary start only reads. */
export async function installRules(c: pg.PoolClient): Promise<void> {
  await c.query('BEGIN');
  try {
    for (const old of RETIRED_FUNCTIONS) {
      if ((await c.query('SELECT to_regprocedure($1) IS NOT NULL AS there', [old])).rows[0]!.there) await c.query(`DROP FUNCTION ${old}`);
    }
    const installed = (await c.query(INSTALLED_FUNCTIONS, [FUNCTIONS.map(functionName)])).rows as { name: string; signature: string; mark: string | null; def: string }[];
    for (const sql of FUNCTIONS) {
      const name = functionName(sql);
      if (installed.some((f) => f.name === name && f.mark === markOf(sql, f.def))) continue;
      // CREATE OR REPLACE FUNCTION locks no table, and calls running meanwhile finish with the
      // text they started with
      await c.query(sql);
      // the function just written is the one whose row this transaction wrote (another of the
      // same name, of other arguments, is not this build's)
      const mine = (await c.query(`${INSTALLED_FUNCTIONS} AND p.xmin = pg_current_xact_id()::xid`, [[name]])).rows[0] as { signature: string; def: string };
      // a signature as PostgreSQL prints it (lowercase names and types), hexadecimal digits and
      // plain words: nothing to quote
      await c.query(`COMMENT ON FUNCTION ${mine.signature} IS '${markOf(sql, mine.def)}'`);
    }
    for (const t of TRIGGERS) {
      // A trigger is replaced under a lock that waits for every transaction writing its table,
      // and every write waits behind it: so only when it is not the one this text installed,
      // and an ordinary start never waits on a call in flight.
      const installed = `SELECT obj_description(oid, 'pg_trigger') AS mark, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = $1 AND tgrelid = $2::regclass`;
      const have = (await c.query(installed, [t.name, t.table])).rows[0];
      if (have && have.mark === markOf(t.sql, have.def as string)) continue;
      await c.query(t.sql);
      const def = (await c.query(installed, [t.name, t.table])).rows[0]!.def as string;
      await c.query(`COMMENT ON TRIGGER ${t.name} ON ${t.table} IS '${markOf(t.sql, def)}'`);
    }
    const recorded = (await c.query('SELECT version, digest FROM schema_rules')).rows[0];
    if (recorded?.version !== RULES_VERSION || recorded?.digest !== rulesDigest()) {
      await c.query(
        `INSERT INTO schema_rules (version, digest) VALUES ($1, $2)
          ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version, digest = EXCLUDED.digest, installed_at = now()`,
        [RULES_VERSION, rulesDigest()],
      );
    }
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
