// Apart from env.ts so that the LMDB store (every thread that opens it, the metering writer
// included) reads its default without loading and compiling the configuration's schema.

// LMDB's map is address space, not memory or disk: lmdb-js maps the whole of it at open and
// the file grows only as pages are written. A store that outgrows it is mapped again at twice
// the size and the old mapping is kept (lmdb-js leaves it for readers still on it), so every
// page read since is resident twice as RssFile counts it: at the former 2 GiB a store passed
// it within an hour of a W16 soak (bench/results/soak-30min.md). 1 TiB is the steady state of
// about 2.5 million charged calls a day at the default retentions (docs/capacity.md, Sizing).
export const DEFAULT_LMDB_MAP_SIZE_GIB = 1024;
