import type { Command } from '../cli/main.ts';
import { now } from '../clock.ts';
import { loadConfig } from '../config/index.ts';
import { ensureSigningKey, listKeys, publicJwks, rotateSigningKey } from './keys.ts';

// The signing key lives beside the store in DATA_DIR; these commands do not need the store
// but share the CLI's shape (JSON on stdout).
const dataDir = () => loadConfig().DATA_DIR;

export const signingCommands: Record<string, Command> = {
  'keys rotate': {
    usage: 'keys rotate   (new verdict signing key; the old public key stays in the JWKS for 7 days)',
    run: async () => rotateSigningKey(dataDir(), now()),
  },
  'keys list': {
    usage: 'keys list   (verdict signing keys: kid, created_at, retired_at, published)',
    async run() {
      const dir = dataDir();
      const current = (await ensureSigningKey(dir, now())).kid;
      const published = new Set(publicJwks(dir, now()).keys.map((k) => k.kid));
      return { keys: listKeys(dir).map((k) => ({ kid: k.kid, created_at: k.created_at, retired_at: k.retired_at, current: k.kid === current, published: published.has(k.kid) })) };
    },
  },
};
