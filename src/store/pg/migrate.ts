import type pg from 'pg';
import { MIGRATIONS } from './migrations.ts';
import { installedRules, installRules, rulesRefusal, RULES_TABLE } from './rules.ts';
import { fillNameKeys } from './tokens.ts';

// Any fixed 64-bit number names the lock; this one is "lvstore" in ASCII.
const MIGRATION_LOCK = 0x6c7673746f7265;

/** The database's name, and whether it holds this service's schema (what a first migrate
 * makes), read without writing anything. The tables of the first migration are asked for
 * beside schema_migrations, a name other tools use too. */
export async function serviceSchema(pool: pg.Pool): Promise<{ database: string; present: boolean }> {
  const r = await pool.query(`SELECT current_database() AS database,
    to_regclass('schema_migrations') IS NOT NULL AND to_regclass('nodes') IS NOT NULL AND to_regclass('reservations') IS NOT NULL AND to_regclass('ledger') IS NOT NULL AS present`);
  return r.rows[0] as { database: string; present: boolean };
}

/** Applies the migrations this database lacks, each in its own transaction, then installs this
 * build's rules (rules.ts: the stored functions and triggers, each replaced only where the
 * database's differs from this build's), under a
 * session-level advisory lock: nodes starting together wait for the first to finish and
 * then find no migration left to do. Returns the versions applied by this call. */
export async function migrate(pool: pg.Pool): Promise<number[]> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
      const done = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r) => r.version as number));
      const newest = Math.max(0, ...done);
      const known = MIGRATIONS[MIGRATIONS.length - 1]!.version;
      if (newest > known) throw new Error(`database schema version ${newest} is newer than this build's ${known}`);
      await client.query(RULES_TABLE);
      const refused = rulesRefusal(await installedRules(client));
      if (refused !== null) throw new Error(refused);
      const applied: number[] = [];
      for (const m of MIGRATIONS) {
        if (done.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await client.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => {});
          throw err;
        }
        applied.push(m.version);
      }
      await installRules(client);
      // the tokens without a name key: all of them once migration 6 has run, then those a node
      // of an older build wrote meanwhile (a rolling upgrade); found through the key's index
      await fillNameKeys(client);
      return applied;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch((e: Error) => (broken = e));
    }
  } finally {
    client.release(broken);
  }
}
