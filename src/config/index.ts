export { loadConfig, ConfigError, ConfigSchema, type Config } from './env.ts';
