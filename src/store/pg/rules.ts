import { createHash } from 'node:crypto';
import type pg from 'pg';
import { RESERVE_RULES } from './reserve.ts';
import { SETTLE_RULES } from './settle.ts';
import { RECOVERY_RULES } from './recovery.ts';
import { SESSION_REFUND_TRIGGER, SESSION_RULES } from './device-sessions.ts';

// PostgreSQL's metering rules run as stored functions, so each is one round trip under its row
// locks. Each is written in the file of the job that calls it (settle.ts holds lv_settle and
// lv_refund as lmdb/settle.ts holds LMDB's settlement and refund) and installed here, at every
// start, under the migration lock (migrate.ts), after the migrations (which create tables only):
// changing a rule is an edit of its text in its job's file, and the next node to start
// installs it. The role of DATABASE_URL must own the functions (it already creates the tables).

/** Raise with every change of a rule's text (test/store/pg-rules.test.ts pins the text's digest
 * for each version, and fails until both are raised): a node of an older build refuses to start
 * on a database whose rules are newer, rather than putting its older rules back under the newer
 * nodes, as a database whose schema is newer is refused. */
export const RULES_VERSION = 1;

/** the functions, in the order they are installed */
export const FUNCTIONS: readonly string[] = [...SETTLE_RULES, ...RESERVE_RULES, ...RECOVERY_RULES, ...SESSION_RULES];

interface Trigger {
  readonly name: string;
  readonly table: string;
  /** CREATE OR REPLACE TRIGGER ... */
  readonly sql: string;
}

/** installed after the functions they execute */
export const TRIGGERS: readonly Trigger[] = [SESSION_REFUND_TRIGGER];

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
export async function installedRulesVersion(c: pg.PoolClient): Promise<number> {
  return ((await c.query('SELECT version FROM schema_rules')).rows[0]?.version as number | undefined) ?? 0;
}

/** Installs this build's rules in one transaction, so a node sees all of them or none. The
 * caller holds the migration lock and has checked that the database's rules are not newer. */
export async function installRules(c: pg.PoolClient): Promise<void> {
  await c.query('BEGIN');
  try {
    // CREATE OR REPLACE FUNCTION locks no table, and calls running meanwhile finish with the
    // text they started with
    for (const sql of FUNCTIONS) await c.query(sql);
    for (const t of TRIGGERS) {
      // A trigger is replaced under a lock that waits for every transaction writing its table,
      // and every write waits behind it: so only when it is not the one this text installed.
      // Its comment says which text installed it and what PostgreSQL made of it, so a trigger
      // changed since (even by CREATE OR REPLACE, which keeps the comment) is replaced too, and
      // an ordinary start never waits on a call in flight.
      const installed = `SELECT obj_description(oid, 'pg_trigger') AS mark, pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = $1 AND tgrelid = $2::regclass`;
      const markOf = (def: string) => `liveness-service rule: text sha256 ${sha256(t.sql)}, definition sha256 ${sha256(def)}`;
      const have = (await c.query(installed, [t.name, t.table])).rows[0];
      if (have && have.mark === markOf(have.def as string)) continue;
      await c.query(t.sql);
      const def = (await c.query(installed, [t.name, t.table])).rows[0]!.def as string;
      // hexadecimal digits and plain words: nothing to quote
      await c.query(`COMMENT ON TRIGGER ${t.name} ON ${t.table} IS '${markOf(def)}'`);
    }
    await c.query(
      `INSERT INTO schema_rules (version, digest) VALUES ($1, $2)
        ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version, digest = EXCLUDED.digest, installed_at = now()`,
      [RULES_VERSION, rulesDigest()],
    );
    await c.query('COMMIT');
  } catch (err) {
    await c.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
