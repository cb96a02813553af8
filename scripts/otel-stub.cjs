// Stands in for @opentelemetry/api inside the bundles of the compiled build (scripts/bundle.mjs).
// prom-client requires it at load for one purpose: exemplars on process_cpu_seconds_total,
// which this service neither enables nor reports from API workers (process_* metrics come
// from the main thread). Loading the real package cost about 1 MiB per API worker.
'use strict';
module.exports = {
  trace: { getSpan: () => undefined },
  context: { active: () => undefined },
};
