import { LmdbBackend } from '../../src/store/lmdb/index.ts';
import { openStore } from '../../src/store/lmdb/open.ts';
import { meteringWriterOf } from '../../src/store/lmdb/writer.ts';
import { WriterClient } from '../../src/store/lmdb/writer-client.ts';

/** Direct access to a server's store for assertions (LMDB allows several processes). */
export function lmdbOpen(dataDir: string) {
  const s = openStore(dataDir);
  return { ...s.db, close: () => s.close() };
}

/** An API worker's handle on the store of `main` (the main thread's handle, opened on
 * `dataDir`): its metering writes go to the process's metering writer thread, which `main`
 * starts, as an API worker's do in the service (src/store/lmdb/writer.ts). `client` is its
 * channel (a test may send it an empty request, answered after the writer's next commit). */
export function apiWorkerHandle(main: LmdbBackend, dataDir: string): { store: LmdbBackend; client: WriterClient } {
  const client = new WriterClient(meteringWriterOf(main.store)!.connect()!.port);
  const store = LmdbBackend.open(dataDir, { writer: client });
  noteApiWorkerHandle(store, main);
  return { store, client };
}

/** The main thread's handle of each API worker handle made here or by startApi: the one whose
 * metering writer commits the worker's metering writes, which a test reaches through it
 * (test/verify/world.ts diskFull). */
const mainHandles = new WeakMap<LmdbBackend, LmdbBackend>();

export function noteApiWorkerHandle(store: LmdbBackend, main: LmdbBackend): void {
  mainHandles.set(store, main);
}

/** The main thread's handle behind an API worker handle (noteApiWorkerHandle), or null. */
export function mainHandleOf(store: LmdbBackend): LmdbBackend | null {
  return mainHandles.get(store) ?? null;
}
