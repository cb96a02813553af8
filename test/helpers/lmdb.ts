import { openStore } from '../../src/store/lmdb/open.ts';

/** Direct access to a server's store for assertions (LMDB allows several processes). */
export function lmdbOpen(dataDir: string) {
  const s = openStore(dataDir);
  return { ...s.db, close: () => s.close() };
}
