// The LMDB store's own surface, beside the backend: for the tools that work on one LMDB store
// directly (the CLI's backup and restore and `db migrate`'s schema version; benches and tests
// that open a store and write records around the interface). Everything else goes through
// StoreBackend's roles (store/index.ts).
export { lmdbStoreExists, openStore, SCHEMA_VERSION, type Store } from './open.ts';
export { appendLedger } from './ledger.ts';
export { reserve } from './reserve.ts';
export { settle, refund } from './settle.ts';
export { writeAudit } from './audit.ts';
export { BackupError, backupStore, keysBesideBackup, restoreStore, type PreparedKeys, type RestoreKeys } from './backup.ts';
// the backend behind StoreBackend, and its environment for LMDB's own operations
export { LmdbBackend, embeddedStore, meteringWriterChannel } from './backend.ts';
