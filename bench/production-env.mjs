// The environment `npm start` (package.json) and deploy/liveness.service give the service
// beyond the operator's own settings, so that benchmarks measure what production runs.
// MALLOC_MMAP_THRESHOLD_: see docs/capacity.md, "Memory".
export const PRODUCTION_ENV = {
  MALLOC_MMAP_THRESHOLD_: process.env.MALLOC_MMAP_THRESHOLD_ ?? '32768',
};
