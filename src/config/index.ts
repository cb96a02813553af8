export { loadConfig, ConfigError, ConfigSchema, SLOTS_PER_WORKER, type Config } from './env.ts';
