import { randomBytes } from 'node:crypto';
import type { Grant, ReserveInput, TokenRecord } from '../../src/store/index.ts';

// Store records for driving a store directly: bench/store.ts and the store contract suite
// (test/store/contract.ts) both start from these.

export const T0 = Date.parse('2026-05-04T10:00:00Z');
const id = (p: string) => `${p}_${randomBytes(6).toString('hex')}`;

export function tokenRecord(grants: Grant[], over: Partial<TokenRecord> = {}): TokenRecord {
  const tid = id('tok');
  return {
    id: tid, name: tid, token_prefix: 'lvk_test', hash: randomBytes(32).toString('hex'), enabled: true, expires_at: null, demo: false, revoked: false,
    created_at: new Date(T0).toISOString(), grants, ...over,
  };
}

export function reserveInput(token: TokenRecord, over: Partial<ReserveInput> = {}): ReserveInput {
  return { token, moduleId: 'rgb_liveness', units: 1, requestId: id('req'), idempotencyKey: null, fingerprint: null, at: T0, ...over };
}
