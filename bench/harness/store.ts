import { createToken, duplicateGrantIndex } from '../../src/admin/tokens.ts';
import { setClockFile } from '../../src/clock.ts';
import { loadConfig } from '../../src/config/index.ts';
import { MODULE_IDS, type ModuleId } from '../../src/contract/index.ts';
import { openConfiguredStore, type Grant, type Period, type StoreBackend } from '../../src/store/index.ts';

// A running server's store opened in the test process the way the operator CLI opens it
// (src/cli/main.ts: loadConfig, then openConfiguredStore): LMDB in the server's DATA_DIR (LMDB
// allows several processes, and lmdb-js shares one environment per path inside a process) or
// PostgreSQL at the server's DATABASE_URL. It is opened per call and closed after, as a CLI
// run does, so a test holds no handle on the store between calls. Making a token this way
// instead of spawning `node --import tsx src/cli/main.ts` saves a TypeScript start-up (seconds
// on a loaded 2-core host) per token; the CLI keeps its own tests (test/cli/cli-basics,
// test/auth/business-tokens).

export interface StoreTarget {
  dataDir: string;
  /** the server's environment overrides (DATABASE_URL, LMDB_COMMITS, CLOCK_FILE, ...) */
  env?: Record<string, string>;
  /** an in-process server's own store (test/helpers/api.ts startApi): used as it is, never a
   * second handle on the same LMDB path in this process (a second handle opened and closed
   * beside the served one stalled files of the suite under load) */
  store?: StoreBackend;
}

export async function withServerStore<T>(target: StoreTarget, fn: (store: StoreBackend) => Promise<T>): Promise<T> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATA_DIR: target.dataDir, ...target.env };
  const config = loadConfig(env);
  // the server and its CLI read CLOCK_FILE from their environment: follow it while the store
  // is used, so records carry the server's (test) time
  setClockFile(env.CLOCK_FILE || undefined);
  if (target.store !== undefined) {
    try {
      return await fn(target.store);
    } finally {
      setClockFile(process.env.CLOCK_FILE || undefined);
    }
  }
  const store = await openConfiguredStore(config);
  try {
    return await fn(store);
  } finally {
    await store.close();
    setClockFile(process.env.CLOCK_FILE || undefined);
  }
}

function grantOf(spec: string): Grant {
  const [m, l, p] = spec.split(':');
  if (!MODULE_IDS.includes(m as ModuleId)) throw new Error(`unknown module in grant ${spec}`);
  if (p !== 'day' && p !== 'month' && p !== 'never') throw new Error(`bad period in grant ${spec}`);
  const limit = l === 'unlimited' || l === 'null' ? null : Number(l);
  if (limit !== null && !(Number.isInteger(limit) && limit >= 0)) throw new Error(`bad limit in grant ${spec}`);
  return { module_id: m as ModuleId, limit, period: p as Period };
}

/** Creates a token in the server's store (the CLI's `token create`, in-process). `grants` are
 * the CLI's `module:limit|unlimited:day|month|never`; `extra` takes the CLI's `--demo` and
 * `--expires ISO`. */
export async function createTokenIn(target: StoreTarget, name: string, grantSpecs: string[], extra: string[] = []): Promise<{ id: string; token: string }> {
  const grants = grantSpecs.map(grantOf);
  if (duplicateGrantIndex(grants) >= 0) throw new Error(`a module is granted twice: ${grantSpecs.join(', ')}`);
  let demo = false;
  let expires: string | null = null;
  for (let i = 0; i < extra.length; i++) {
    if (extra[i] === '--demo') demo = true;
    else if (extra[i] === '--expires' && extra[i + 1] !== undefined) expires = new Date(Date.parse(extra[++i]!)).toISOString();
    else throw new Error(`createTokenIn: unsupported option ${extra[i]}`);
  }
  return withServerStore(target, async (store) => {
    const { token, plaintext } = await createToken(store, { name, grants, demo, expires_at: expires });
    return { id: token.id, token: plaintext };
  });
}

/** The CLI's `ledger verify` in-process: every usage counter recomputed from the ledger. The
 * answer has the CLI's shape (exit code 1 on a mismatch, the check as `json`), so a test reads
 * it the same way; the CLI command itself keeps its tests (test/service/backup-restore,
 * test/cli/restore-cli). */
export async function ledgerVerify(target: StoreTarget): Promise<{ code: number; json: any; stdout: string; stderr: string }> {
  const check = await withServerStore(target, (store) => store.verifyLedger());
  const stdout = JSON.stringify(check, null, 2);
  return { code: check.ok ? 0 : 1, json: check, stdout, stderr: '' };
}
