import type { Command } from './main.ts';
import { now } from '../clock.ts';
import { loadConfig } from '../config/index.ts';
import { publicJwksOf } from '../signing/keys.ts';
import { keySourceFor } from '../signing/source.ts';

// Keys live beside the store: DATA_DIR/keys files with LMDB, the shared database with
// PostgreSQL (every node picks a rotation up within SHARED_KEY_CACHE_MS).
const keys = (store: Parameters<Command['run']>[0]) => keySourceFor(store, loadConfig().DATA_DIR);

export const signingCommands: Record<string, Command> = {
  'keys rotate': {
    usage: 'keys rotate   (new verdict signing key; the old public key stays in the JWKS for 7 days)',
    run: async (store) => keys(store).rotate(now()),
  },
  'keys list': {
    usage: 'keys list   (verdict signing keys: kid, created_at, retired_at, published)',
    async run(store) {
      const source = keys(store);
      const current = (await source.current(now())).kid;
      const all = await source.list();
      const published = new Set(publicJwksOf(all, now()).keys.map((k) => k.kid));
      return { keys: all.map((k) => ({ kid: k.kid, created_at: k.created_at, retired_at: k.retired_at, current: k.kid === current, published: published.has(k.kid) })) };
    },
  },
};
