export { loadConfig, ConfigError, ConfigSchema, DEFAULT_LMDB_MAP_SIZE_GIB, DEFAULT_RETRY_AFTER_SECONDS, DRAIN_TIMEOUT_MS, SLOTS_PER_WORKER, testingSettings, type Config } from './env.ts';
export { DatabaseUrlError, hostName, hostUrl, parseDatabaseUrl, type DatabaseHost, type DatabaseTarget } from './database-url.ts';
