// Stands in for @opentelemetry/api inside the bundles of the compiled build (scripts/bundle.mjs).
// prom-client requires it at load for one purpose: exemplars (on process_cpu_seconds_total and
// on metrics created with enableExemplars), which this service never enables; the process_*
// metrics themselves are unaffected (the main thread reports them). Loading the real package
// cost about 1 MiB per API worker. Tracing (src/observability/tracing.ts) does not use this:
// when configured it loads tracing.bundle.mjs, which holds the real API and the SDK.
'use strict';
module.exports = {
  trace: { getSpan: () => undefined },
  context: { active: () => undefined },
};
