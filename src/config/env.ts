import os from 'node:os';
import path from 'node:path';
import { Type, type Static } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { DatabaseUrlError, parseDatabaseUrl } from './database-url.ts';

// Start-up variables: contract.md "Running it" fixes HOST, PORT, DATA_DIR, WORKERS,
// COOKIE_PREFIX, COOKIE_SECURE, ADMIN_USERNAME/PASSWORD; the rest are documented in docs/configuration.md.
const MAX_WORKERS = 64;
// The spec's capacity: 2 concurrent verify calls per API worker, pooled host-wide.
export const SLOTS_PER_WORKER = 2;
/** RETRY_AFTER_SECONDS when unset; also what a component not configured yet (a CLI's password
 * hash gate) tells a client to wait. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;
/** The longest a drain waits for in-flight calls before the process stops anyway; the
 * systemd unit's TimeoutStopSec must stay above it (test/deploy/systemd-unit.test.ts checks).
 * Only a test shortens it (TEST_DRAIN_TIMEOUT_MS), to drive a stop whose calls never end. */
export const DRAIN_TIMEOUT_MS = 30_000;
// An API worker mostly waits on uploads (a slot covers the whole upload), and the spec admits 2
// concurrent verify calls per API worker, so the default is sized for slow links rather than
// for cores: 8 per core, at least 8 (16 slots), at most 64. VERIFY_SLOTS, which only an
// operator sets, sizes the slots apart from the workers, outside the spec's 2 per worker: 16
// API workers on 2 cores cost 8.0 ms of CPU per single-rgb8 capture at concurrency 32 against
// 4.9 ms for 2 workers holding the same 32 slots (bench/results/cpu-per-capture.md).
const WORKERS_PER_CORE = 8;
const MIN_DEFAULT_WORKERS = 8;
const MAX_SLOTS = 2 * MAX_WORKERS;
const MAX_INFERENCE_THREADS = 256;
// LMDB's map is address space, not memory or disk: lmdb-js maps the whole of it at open and
// the file grows only as pages are written. A store that outgrows it is mapped again at twice
// the size and the old mapping is kept (lmdb-js leaves it for readers still on it), so every
// page read since is resident twice as RssFile counts it: at the former 2 GiB a store passed
// it within an hour of a W16 soak (bench/results/soak-30min.md). 1 TiB is the steady state of
// about 2.5 million charged calls a day at the default retentions (docs/capacity.md, Sizing).
export const DEFAULT_LMDB_MAP_SIZE_GIB = 1024;
const Int = (min: number, max: number, description: string) => Type.Integer({ minimum: min, maximum: max, description });

export const ConfigSchema = Type.Object({
  HOST: Type.String({ minLength: 1, description: 'listen address' }),
  PORT: Int(0, 65535, 'listen port; 0 picks a free one'),
  DATA_DIR: Type.String({ minLength: 1, description: 'LMDB store, archive and signing key' }),
  DATABASE_URL: Type.Optional(Type.String({
    pattern: '^(postgres(ql)?://|\\s*[A-Za-z_]+\\s*=)',
    description: 'PostgreSQL store shared by several nodes (postgres://... with one host or several, or libpq keyword=value pairs); unset: LMDB in DATA_DIR',
  })),
  DATABASE_POOL_SIZE: Int(1, 10_000, 'PostgreSQL store: connections one node opens at most, shared out over its threads (at least one each: a node uses max(this, WORKERS + 1))'),
  NODE_LEASE_SECONDS: Int(2, 600, 'PostgreSQL store: a node that has not renewed its lease for this long is presumed dead and its pending reservations are refunded'),
  LMDB_MAP_SIZE_GIB: Int(1, 65_536, 'LMDB store: address space mapped for the store file at start, not disk (the file grows as written); a file that outgrows it is mapped again at twice its size with the old mapping kept, and RssFile counts its pages twice'),
  STORE_STALL_SECONDS: Int(1, 3600, 'LMDB store: a commit of the metering writer still running after this long (a stuck disk) makes readiness 503 and new verify calls 503 store_unavailable until it ends'),
  TOKEN_CACHE_SECONDS: Int(0, 300, 'PostgreSQL store: a verify call may start from a token read this long ago (the reservation re-reads it); 0 reads it every call'),
  WORKERS: Int(1, MAX_WORKERS, 'API worker threads'),
  VERIFY_SLOTS: Int(1, MAX_SLOTS, 'verify calls the host admits at once, pooled over its API workers (a slot covers the whole upload); default 2 x WORKERS, the spec\'s 2 per API worker; set, it departs from that figure (docs/capacity.md)'),
  UPLOAD_MIN_BYTES_PER_SECOND: Int(1, 1 << 30, 'an upload slower than this, averaged over UPLOAD_RATE_WINDOW_SECONDS, is answered 408'),
  UPLOAD_RATE_WINDOW_SECONDS: Int(2, 3600, 'the window over which the upload rate is averaged; also the longest stall allowed'),
  UPLOAD_DEADLINE_SECONDS: Int(1, 24 * 3600, 'an upload not finished by then is answered 408'),
  UPLOADS_PER_ADDRESS: Int(1, MAX_SLOTS, 'hard cap on the concurrent verify calls one client address (an IPv6 /64 counts as one) may hold, host-wide, even on an idle host; default: every slot (fair shares already keep a busy host shared: a caller holding none takes a slot from the caller holding the most)'),
  UPLOADS_PER_TOKEN: Int(1, MAX_SLOTS, 'hard cap on the concurrent verify calls one business token may hold, host-wide, even on an idle host; default: every slot (see UPLOADS_PER_ADDRESS)'),
  CONNECTIONS_PER_ADDRESS: Int(1, 1_000_000, 'connections one client address (an IPv6 /64 counts as one) may have with a request in progress on one API worker, early answers still draining their body included; past it a new request is answered 503 server_busy and its connection closed'),
  COOKIE_PREFIX: Type.String({ pattern: '^[A-Za-z0-9_-]{1,32}$', description: 'session cookie is <prefix>_session' }),
  COOKIE_SECURE: Type.Boolean({ description: 'add Secure to the session cookie' }),
  ADMIN_USERNAME: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9_.@-]{1,64}$' })),
  // 8 to 1,024 characters, counted in code points below (as the admin API counts a password:
  // src/packets/lengths.ts); TypeBox's own bounds count UTF-16 units
  ADMIN_PASSWORD: Type.Optional(Type.String()),
  MODELS_DIR: Type.String({ minLength: 1, description: 'folder holding model sets' }),
  MODEL_SET: Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$', description: 'model set served' }),
  REQUIRE_TRAINED_MODELS: Type.Boolean({ description: 'a model set whose manifest says trained: false never becomes ready (set it in production)' }),
  INFERENCE_BACKEND: Type.Union([Type.Literal('auto'), Type.Literal('wasm'), Type.Literal('webgpu'), Type.Literal('native')], {
    description: 'auto: the fastest of native (onnxruntime-node), wasm and, on a hardware adapter, webgpu, as measured at start-up on the served graphs (docs/inference-backends.md)',
  }),
  LMDB_COMMITS: Type.Union([Type.Literal('sync'), Type.Literal('batched')], { description: 'how LMDB metering transactions commit: sync (lowest latency) or batched (most commits per second)' }),
  INFERENCE_THREADS: Int(1, MAX_INFERENCE_THREADS, 'total inference threads'),
  WARMUP_RUNS: Int(0, 1000, 'warm-up runs per graph and worker'),
  MODEL_LOAD_TIMEOUT_SECONDS: Int(1, 86_400, 'a model set whose load, checks and warm-up have not finished by then is refused with that reason (at start its modules stay unready); the serving set stays'),
  INFERENCE_TIMEOUT_SECONDS: Int(1, 3600, 'a verify call with no inference result by then fails as inference_failed and is refunded'),
  START_TIMEOUT_SECONDS: Int(0, 86_400, 'a start that has not listened by then logs the step it waits for and exits 1 (the start-up watchdog); 0 waits for ever'),
  GC_INITIAL_OLD_SPACE_MB: Int(0, 4096, "V8's initial old-generation size for every worker thread (API workers, inference threads); 0, the default, keeps V8's own sizing. Larger means fewer full collections and up to that much garbage per thread kept resident (docs/capacity.md)"),
  METRICS_TOKEN: Type.Optional(Type.String({ minLength: 16, description: 'bearer token that opens /metrics beyond loopback' })),
  TLS_CERT_FILE: Type.Optional(Type.String({ minLength: 1, description: 'PEM certificate chain; with TLS_KEY_FILE the listener serves HTTPS' })),
  TLS_KEY_FILE: Type.Optional(Type.String({ minLength: 1, description: 'PEM private key for TLS_CERT_FILE' })),
  TLS_KEY_PASSPHRASE: Type.Optional(Type.String({ minLength: 1, description: 'passphrase of an encrypted TLS_KEY_FILE' })),
  TRUSTED_PROXIES: Type.Array(Type.String({ minLength: 1 }), { description: 'addresses whose X-Forwarded-For is believed' }),
  // exact origins as browsers send them: scheme, lowercase host, optional port, nothing after
  CORS_ORIGINS: Type.Array(Type.String({ pattern: '^https?://([a-z0-9.-]+|\\[[0-9a-f:.]+\\])(:[0-9]{1,5})?$' }), { description: 'origins allowed to call /v1 from a browser' }),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  IDEMPOTENCY_RETENTION_HOURS: Int(24, 24 * 365, 'completed idempotency records are kept at least this long'),
  RETENTION_AUDIT_DAYS: Int(0, 36500, 'audit rows older than this are pruned; 0 keeps them'),
  RETENTION_RESULTS_DAYS: Int(0, 36500, 'stored result JSON older than this is pruned; 0 keeps it'),
  RETENTION_LEDGER_DAYS: Int(0, 36500, 'ledger entries older than this are folded into per-window totals; 0 keeps them'),
  RETENTION_ARCHIVE_DAYS: Int(0, 36500, 'demo archive days (face images) older than this are deleted; 0 keeps them'),
  SESSION_IDLE_MINUTES: Int(1, 24 * 60, 'admin session idle timeout'),
  SESSION_ABSOLUTE_HOURS: Int(1, 24 * 30, 'admin session absolute lifetime'),
  RETRY_AFTER_SECONDS: Int(1, 3600, 'Retry-After sent with server_busy and request_in_progress'),
  SESSION_MAX_TTL_SECONDS: Int(1, 86_400, 'device sessions: the longest ttl_seconds a mint gets (a longer ask is shortened to it)'),
  SESSION_MAX_CAPTURES: Int(1, 10_000, 'device sessions: the largest max_captures a mint gets (a larger ask is lowered to it)'),
  SESSION_MINT_LIMIT: Int(1, 1_000_000, 'device sessions: sessions one business token may mint per SESSION_MINT_WINDOW_SECONDS (429 session_rate_limited past it)'),
  SESSION_MINT_WINDOW_SECONDS: Int(1, 86_400, 'device sessions: the sliding window of SESSION_MINT_LIMIT'),
  CLOCK_FILE: Type.Optional(Type.String({ minLength: 1, description: 'testing only: file holding the current time' })),
  TEST_INFERENCE_DELAY_MS: Int(0, 600_000, 'testing only: delay added before inference'),
  TEST_CLOCK_SKEW_MS: Int(-(10 ** 12), 10 ** 12, 'testing only: this node\'s clock is off by this much (src/clock.ts)'),
  TEST_INFERENCE_DELAY_PREFIX: Type.Optional(Type.String({ minLength: 1, description: 'testing only: the delay applies only to captures whose id starts with this' })),
  TEST_INFERENCE_FAIL_PREFIX: Type.Optional(Type.String({ minLength: 1, description: 'testing only: captures whose id starts with this fail inference' })),
  TEST_SETTLEMENT_FAIL_PREFIX: Type.Optional(Type.String({ minLength: 1, description: 'testing only: captures whose id starts with this fail settlement' })),
  TEST_SETTLEMENT_HOLD_PREFIX: Type.Optional(Type.String({ minLength: 1, description: 'testing only: the settlement of captures whose id starts with this stops inside its open transaction until the process is killed' })),
  TEST_DRAIN_TIMEOUT_MS: Int(100, DRAIN_TIMEOUT_MS, 'testing only: a stop waits this long for in-flight calls instead of DRAIN_TIMEOUT_MS (30 s)'),
});

export type Config = Static<typeof ConfigSchema>;
const check = TypeCompiler.Compile(ConfigSchema);

/** The testing-only settings present in `env`: every TEST_* variable (those read anywhere in
 * src/, such as TEST_PASSWORD_SCRYPT_N, which lowers the password hash cost, and
 * TEST_WORKER_FAULTS, which lets a header crash a handler; and any other, so a new knob is
 * never missed) and CLOCK_FILE (a file sets the service's clock). A production build reads
 * them like any other build: start-up warns for each one set (docs/configuration.md). */
export function testingSettings(env: NodeJS.ProcessEnv = process.env): string[] {
  return Object.keys(env).filter((k) => (k.startsWith('TEST_') || k === 'CLOCK_FILE') && env[k] !== undefined && env[k] !== '').sort();
}

/** Not an HTTP error: a configuration refused at start-up, printed as one line before the
 * process exits; no request is ever answered with it. */
export class ConfigError extends Error {}

// Configuration errors go to stderr and from there to journals and CI logs: a secret in one
// must not be echoed back. These are shown by length only; DATABASE_URL without its password.
const SECRET_VARIABLES = new Set(['ADMIN_PASSWORD', 'METRICS_TOKEN', 'TLS_KEY_PASSPHRASE']);

/** A configured value as an error message may show it. */
export function shownValue(name: string, value: unknown): string {
  if (typeof value === 'string' && SECRET_VARIABLES.has(name)) return `[redacted, ${[...value].length} characters]`;
  if (typeof value === 'string' && name === 'DATABASE_URL') return JSON.stringify(redactUrl(value));
  return JSON.stringify(value);
}

/** The password of a connection URL, in the authority (user:password@) or as a query
 * parameter (?password=), replaced; works on malformed URLs too, which are the ones an error
 * names. The password runs to the last @, as an unencoded one may hold / or @. */
export function redactUrl(url: string): string {
  let out = url.replace(/([?&]password=)[^&#]*/gi, '$1[redacted]');
  // libpq's keyword form: password=secret or password='quoted secret'
  out = out.replace(/(^|\s)(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)/gi, '$1$2[redacted]');
  // after `scheme:/` or `scheme://` when there is one; without, a colon before the @ may be
  // the scheme's or the password's, and hiding too much is the safe side
  const start = /^[a-z][a-z0-9+.-]*:\/+/i.exec(out)?.[0].length ?? 0;
  const at = out.lastIndexOf('@');
  const colon = out.indexOf(':', start);
  if (colon !== -1 && colon < at) out = `${out.slice(0, colon + 1)}[redacted]${out.slice(at)}`;
  return out;
}

function bool(name: string, raw: string | undefined, def: boolean): boolean {
  if (raw === undefined || raw === '') return def;
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be 1/0, true/false, yes/no or on/off (got ${JSON.stringify(raw)})`);
}

function int(name: string, raw: string | undefined, def: number): number {
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a non-negative integer (got ${JSON.stringify(raw)})`);
  return Number(raw);
}

/** A path or address as given: one with spaces at an end is refused, since it names another
 * place than the one meant (DATA_DIR=" /srv/x" served a new, empty store at <cwd>/ /srv/x). */
function unpadded(name: string, raw: string | undefined): string | undefined {
  if (raw !== undefined && raw !== raw.trim()) throw new ConfigError(`${name} has spaces at its start or end (got ${JSON.stringify(raw)}): a path or address with them names another place`);
  return raw;
}

/** An integer that may be negative (a clock skew). */
function signedInt(name: string, raw: string | undefined, def: number): number {
  if (raw === undefined || raw === '') return def;
  if (!/^-?\d+$/.test(raw)) throw new ConfigError(`${name} must be an integer (got ${JSON.stringify(raw)})`);
  return Number(raw);
}

function opt(raw: string | undefined): string | undefined {
  return raw === undefined || raw === '' ? undefined : raw;
}

/** Reads and validates the environment; throws ConfigError naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, cwd = process.cwd(), cpuCount = os.availableParallelism()): Config {
  const cores = Math.max(1, cpuCount);
  const raw = {
    HOST: unpadded('HOST', env.HOST) || '127.0.0.1',
    PORT: int('PORT', env.PORT, 8080),
    DATA_DIR: path.resolve(cwd, unpadded('DATA_DIR', env.DATA_DIR) || './data'),
    DATABASE_URL: opt(env.DATABASE_URL),
    DATABASE_POOL_SIZE: int('DATABASE_POOL_SIZE', env.DATABASE_POOL_SIZE, 24),
    NODE_LEASE_SECONDS: int('NODE_LEASE_SECONDS', env.NODE_LEASE_SECONDS, 15),
    LMDB_MAP_SIZE_GIB: int('LMDB_MAP_SIZE_GIB', env.LMDB_MAP_SIZE_GIB, DEFAULT_LMDB_MAP_SIZE_GIB),
    STORE_STALL_SECONDS: int('STORE_STALL_SECONDS', env.STORE_STALL_SECONDS, 10),
    TOKEN_CACHE_SECONDS: int('TOKEN_CACHE_SECONDS', env.TOKEN_CACHE_SECONDS, 5),
    // the default stays inside the accepted range, so a large host starts
    WORKERS: int('WORKERS', env.WORKERS, Math.min(Math.max(MIN_DEFAULT_WORKERS, cores * WORKERS_PER_CORE), MAX_WORKERS)),
    VERIFY_SLOTS: 0,
    UPLOAD_MIN_BYTES_PER_SECOND: int('UPLOAD_MIN_BYTES_PER_SECOND', env.UPLOAD_MIN_BYTES_PER_SECOND, 8000),
    UPLOAD_RATE_WINDOW_SECONDS: int('UPLOAD_RATE_WINDOW_SECONDS', env.UPLOAD_RATE_WINDOW_SECONDS, 10),
    UPLOAD_DEADLINE_SECONDS: int('UPLOAD_DEADLINE_SECONDS', env.UPLOAD_DEADLINE_SECONDS, 600),
    UPLOADS_PER_ADDRESS: 0,
    UPLOADS_PER_TOKEN: 0,
    CONNECTIONS_PER_ADDRESS: int('CONNECTIONS_PER_ADDRESS', env.CONNECTIONS_PER_ADDRESS, 64),
    COOKIE_PREFIX: env.COOKIE_PREFIX || 'lv',
    // Served over TLS, the session cookie is Secure unless the operator says otherwise.
    COOKIE_SECURE: bool('COOKIE_SECURE', env.COOKIE_SECURE, Boolean(opt(env.TLS_CERT_FILE) && opt(env.TLS_KEY_FILE))),
    ADMIN_USERNAME: opt(env.ADMIN_USERNAME),
    ADMIN_PASSWORD: opt(env.ADMIN_PASSWORD),
    MODELS_DIR: path.resolve(cwd, unpadded('MODELS_DIR', env.MODELS_DIR) || './models'),
    MODEL_SET: env.MODEL_SET || 'raw_v1',
    REQUIRE_TRAINED_MODELS: bool('REQUIRE_TRAINED_MODELS', env.REQUIRE_TRAINED_MODELS, false),
    INFERENCE_BACKEND: env.INFERENCE_BACKEND || 'auto',
    LMDB_COMMITS: env.LMDB_COMMITS || 'sync',
    INFERENCE_THREADS: int('INFERENCE_THREADS', env.INFERENCE_THREADS, Math.min(cores, MAX_INFERENCE_THREADS)),
    WARMUP_RUNS: int('WARMUP_RUNS', env.WARMUP_RUNS, 30),
    MODEL_LOAD_TIMEOUT_SECONDS: int('MODEL_LOAD_TIMEOUT_SECONDS', env.MODEL_LOAD_TIMEOUT_SECONDS, 600),
    INFERENCE_TIMEOUT_SECONDS: int('INFERENCE_TIMEOUT_SECONDS', env.INFERENCE_TIMEOUT_SECONDS, 120),
    // model warm-up is not part of it (readiness reports that); a start from the sources
    // through tsx on a loaded 2-core host has taken over a minute to listen
    START_TIMEOUT_SECONDS: int('START_TIMEOUT_SECONDS', env.START_TIMEOUT_SECONDS, 300),
    // 0: V8 sizes each thread's old generation from what it keeps, so RssAnon levels off within
    // minutes whatever WORKERS is (64 held up to 64 MiB of garbage per thread: at the default 16
    // API workers of a 2-core host, about 1 GiB before any full collection; src/cluster/tune-gc.ts)
    GC_INITIAL_OLD_SPACE_MB: int('GC_INITIAL_OLD_SPACE_MB', env.GC_INITIAL_OLD_SPACE_MB, 0),
    METRICS_TOKEN: opt(env.METRICS_TOKEN),
    TLS_CERT_FILE: opt(env.TLS_CERT_FILE) && path.resolve(cwd, env.TLS_CERT_FILE!),
    TLS_KEY_FILE: opt(env.TLS_KEY_FILE) && path.resolve(cwd, env.TLS_KEY_FILE!),
    TLS_KEY_PASSPHRASE: opt(env.TLS_KEY_PASSPHRASE),
    TRUSTED_PROXIES: (env.TRUSTED_PROXIES || '').split(',').map((s) => s.trim()).filter(Boolean),
    CORS_ORIGINS: (env.CORS_ORIGINS || '').split(',').map((s) => s.trim()).filter(Boolean),
    LOG_LEVEL: env.LOG_LEVEL || 'info',
    IDEMPOTENCY_RETENTION_HOURS: int('IDEMPOTENCY_RETENTION_HOURS', env.IDEMPOTENCY_RETENTION_HOURS, 24),
    RETENTION_AUDIT_DAYS: int('RETENTION_AUDIT_DAYS', env.RETENTION_AUDIT_DAYS, 400),
    RETENTION_RESULTS_DAYS: int('RETENTION_RESULTS_DAYS', env.RETENTION_RESULTS_DAYS, 90),
    RETENTION_LEDGER_DAYS: int('RETENTION_LEDGER_DAYS', env.RETENTION_LEDGER_DAYS, 400),
    RETENTION_ARCHIVE_DAYS: int('RETENTION_ARCHIVE_DAYS', env.RETENTION_ARCHIVE_DAYS, 30),
    SESSION_IDLE_MINUTES: int('SESSION_IDLE_MINUTES', env.SESSION_IDLE_MINUTES, 30),
    SESSION_ABSOLUTE_HOURS: int('SESSION_ABSOLUTE_HOURS', env.SESSION_ABSOLUTE_HOURS, 12),
    RETRY_AFTER_SECONDS: int('RETRY_AFTER_SECONDS', env.RETRY_AFTER_SECONDS, DEFAULT_RETRY_AFTER_SECONDS),
    SESSION_MAX_TTL_SECONDS: int('SESSION_MAX_TTL_SECONDS', env.SESSION_MAX_TTL_SECONDS, 3600),
    SESSION_MAX_CAPTURES: int('SESSION_MAX_CAPTURES', env.SESSION_MAX_CAPTURES, 100),
    SESSION_MINT_LIMIT: int('SESSION_MINT_LIMIT', env.SESSION_MINT_LIMIT, 120),
    SESSION_MINT_WINDOW_SECONDS: int('SESSION_MINT_WINDOW_SECONDS', env.SESSION_MINT_WINDOW_SECONDS, 60),
    CLOCK_FILE: opt(env.CLOCK_FILE),
    TEST_INFERENCE_DELAY_MS: int('TEST_INFERENCE_DELAY_MS', env.TEST_INFERENCE_DELAY_MS, 0),
    TEST_CLOCK_SKEW_MS: signedInt('TEST_CLOCK_SKEW_MS', env.TEST_CLOCK_SKEW_MS, 0),
    TEST_INFERENCE_DELAY_PREFIX: opt(env.TEST_INFERENCE_DELAY_PREFIX),
    TEST_INFERENCE_FAIL_PREFIX: opt(env.TEST_INFERENCE_FAIL_PREFIX),
    TEST_SETTLEMENT_FAIL_PREFIX: opt(env.TEST_SETTLEMENT_FAIL_PREFIX),
    TEST_SETTLEMENT_HOLD_PREFIX: opt(env.TEST_SETTLEMENT_HOLD_PREFIX),
    TEST_DRAIN_TIMEOUT_MS: int('TEST_DRAIN_TIMEOUT_MS', env.TEST_DRAIN_TIMEOUT_MS, DRAIN_TIMEOUT_MS),
  };
  // The hard caps default to every slot of the host (validated once VERIFY_SLOTS is known): on a
  // contended host the fair shares of src/http/capacity.ts give a caller holding none a slot
  // of the caller holding the most, so a fixed cap would only idle slots that a lone tenant
  // could use. An operator may still set one.
  // unset, the spec's 2 slots per API worker
  const slotsByDefault = Number.isInteger(raw.WORKERS) ? Math.min(raw.WORKERS * SLOTS_PER_WORKER, MAX_SLOTS) : 2;
  raw.VERIFY_SLOTS = int('VERIFY_SLOTS', env.VERIFY_SLOTS, slotsByDefault);
  const slots = Number.isInteger(raw.VERIFY_SLOTS) ? raw.VERIFY_SLOTS : 2;
  raw.UPLOADS_PER_ADDRESS = int('UPLOADS_PER_ADDRESS', env.UPLOADS_PER_ADDRESS, slots);
  raw.UPLOADS_PER_TOKEN = int('UPLOADS_PER_TOKEN', env.UPLOADS_PER_TOKEN, slots);
  const errors = [...check.Errors(raw)];
  const passwordChars = typeof raw.ADMIN_PASSWORD === 'string' ? [...raw.ADMIN_PASSWORD].length : null;
  const passwordFault = passwordChars !== null && (passwordChars < 8 || passwordChars > 1024)
    ? [`ADMIN_PASSWORD: must have 8 to 1024 characters (got ${shownValue('ADMIN_PASSWORD', raw.ADMIN_PASSWORD)})`]
    : [];
  if (errors.length > 0 || passwordFault.length > 0) {
    const lines = [...errors.map((e) => {
      const name = e.path.slice(1).split('/')[0]!;
      return `${name}: ${e.message} (got ${shownValue(name, e.value)})`;
    }), ...passwordFault];
    throw new ConfigError(`invalid configuration:\n  ${[...new Set(lines)].join('\n  ')}`);
  }
  if (raw.DATABASE_URL !== undefined) {
    // the whole URL, hosts and ports included, so a URL that cannot work stops the start here
    // with its reason rather than at the first connection (src/config/database-url.ts)
    try {
      parseDatabaseUrl(raw.DATABASE_URL);
    } catch (e) {
      if (!(e instanceof DatabaseUrlError)) throw e;
      throw new ConfigError(`invalid configuration:\n  DATABASE_URL: ${e.message} (got ${shownValue('DATABASE_URL', raw.DATABASE_URL)})`);
    }
  }
  if ((raw.ADMIN_USERNAME === undefined) !== (raw.ADMIN_PASSWORD === undefined)) {
    throw new ConfigError('ADMIN_USERNAME and ADMIN_PASSWORD must be set together');
  }
  if ((raw.TLS_CERT_FILE === undefined) !== (raw.TLS_KEY_FILE === undefined)) {
    throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  }
  return raw as Config;
}
