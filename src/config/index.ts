export { loadConfig, ConfigError, ConfigSchema, SLOTS_PER_WORKER, testingSettings, type Config } from './env.ts';
