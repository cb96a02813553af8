import type { Config } from '../config/index.ts';
import type { VerifyDeps } from './ports.ts';

/** Testing-only faults, set by TEST_* variables and never in production, wrapped around the
 * use case's dependencies so that no domain signature carries them. (The inference faults
 * wrap the engine the same way: src/cluster/engine-host.ts.)
 *
 * TEST_SETTLEMENT_FAIL_PREFIX: a call with a capture whose id starts with the prefix fails its
 * settlement inside the settlement's transaction, the way a failed write would (the store's
 * own injectFailure hook, which both backends implement). */
export function withTestFaults(deps: VerifyDeps, config: Pick<Config, 'TEST_SETTLEMENT_FAIL_PREFIX'>): VerifyDeps {
  const prefix = config.TEST_SETTLEMENT_FAIL_PREFIX;
  if (prefix === undefined) return deps;
  const metering = deps.metering;
  return {
    ...deps,
    metering: {
      ...metering,
      settle(reservation, at, render, results) {
        const hit = Array.isArray(results) && results.some((r: { capture_id?: unknown }) => typeof r.capture_id === 'string' && r.capture_id.startsWith(prefix));
        return metering.settle(reservation, at, render, results, hit);
      },
    },
  };
}
