import { randomBytes } from 'node:crypto';
import { windowKey, type AuditOutcome, type AuditRecord } from '../../src/store/index.ts';
import { appendLedger } from '../../src/store/lmdb/index.ts';
import type { Store } from '../../src/store/lmdb/open.ts';
import type { TokenRecord, UserRecord } from '../../src/store/records.ts';
import { buildTokenNameIndex, indexTokenName } from '../../src/store/lmdb/token-names.ts';

// A console-sized store written straight into LMDB in batched transactions (thousands of
// records per commit), not through HTTP: seeding 5,000 tokens and 50,000 audit rows one
// request at a time would take minutes. Records are shaped as the service writes them, and
// the token name index and daily totals are maintained as the service's own writes do.
// Used by the scale browser test and by bench/console.ts.

export interface SeedOptions {
  tokens: number;
  audit: number;
  ledger: number;
  users: number;
  /** the newest record's time; records spread over the `days` before it */
  now: number;
  days: number;
}

export interface Seeded {
  tokens: { id: string; name: string; token_prefix: string }[];
  users: string[];
}

const BATCH = 5000;
const MODULES = ['rgb_liveness', 'color_liveness'] as const;

/** Deterministic: the same options give the same store (a fixed xorshift sequence). */
function prng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

export const seedTokenName = (i: number) => `${['kiosk', 'branch', 'lobby', 'desk', 'mobile'][i % 5]} ${String(i).padStart(5, '0')}`;
export const seedUserName = (i: number) => `operator-${String(i).padStart(4, '0')}`;

// Every put below runs inside the batch's write transaction (inBatches): lmdb-js applies it
// there and its promise is the transaction's, so it is not awaited one by one (`void`, as in
// src/store/lmdb/settle.ts).
async function inBatches(store: Store, n: number, write: (i: number) => void): Promise<void> {
  for (let start = 0; start < n; start += BATCH) {
    await store.root.transaction(() => {
      for (let i = start; i < Math.min(n, start + BATCH); i++) write(i);
    });
  }
}

export async function seedConsole(store: Store, o: SeedOptions): Promise<Seeded> {
  const rnd = prng(14);
  const span = o.days * 86_400_000;
  const tokens: TokenRecord[] = [];
  await store.root.transaction(() => buildTokenNameIndex(store));
  await inBatches(store, o.tokens, (i) => {
    const id = `tok_${randomBytes(9).toString('base64url')}`;
    const t: TokenRecord = {
      id, name: seedTokenName(i), token_prefix: `lvk_${randomBytes(6).toString('base64url')}`, hash: randomBytes(32).toString('hex'),
      enabled: i % 13 !== 0, expires_at: null, demo: false, revoked: i % 97 === 0, created_at: new Date(o.now - span + i * 1000).toISOString(),
      grants: [{ module_id: 'rgb_liveness', limit: 1000, period: 'day' }],
    };
    indexTokenName(store, undefined, t);
    void store.db.tokenHashes.put(t.hash, t.id);
    void store.db.tokens.put(t.id, t);
    tokens.push(t);
  });
  const users: string[] = [];
  await inBatches(store, o.users, (i) => {
    const u: UserRecord = { id: `usr_${randomBytes(9).toString('base64url')}`, username: seedUserName(i), role: i % 10 === 0 ? 'admin' : 'user', enabled: true, password_hash: 'seeded:no-login', created_at: new Date(o.now - span).toISOString() };
    void store.db.usersByName.put(u.username, u.id);
    void store.db.users.put(u.id, u);
    users.push(u.username);
  });
  const pick = () => tokens[Math.floor(rnd() * tokens.length)]!;
  await inBatches(store, o.ledger, (i) => {
    const at = o.now - Math.floor(rnd() * span);
    appendLedger(store, {
      request_id: `req_seedL${i}`, token_id: pick().id, module_id: MODULES[i % 2]!, units: 1 + (i % 3), kind: i % 20 === 0 ? 'refund' : 'charge', at,
      windows: { day: windowKey('day', at), month: windowKey('month', at) },
    });
  });
  const statuses: [number, string | null, AuditOutcome][] = [
    [200, null, 'live'], [200, null, 'non_live'], [200, null, 'retry'], [200, null, 'live'], [200, null, 'live'], [200, null, 'mixed'],
    [429, 'quota_exceeded', 'error'], [401, 'invalid_token', 'error'], [422, 'invalid_input', 'error'], [500, 'inference_failed', 'error'],
  ];
  await inBatches(store, o.audit, (i) => {
    const at = o.now - Math.floor(rnd() * span);
    const [status, error_code, outcome] = statuses[i % statuses.length]!;
    const token = status === 401 ? null : pick();
    const r: AuditRecord = {
      request_id: `req_seedA${i}`, at: new Date(at).toISOString(), token_id: token?.id ?? null, module_id: MODULES[i % 2]!, client_ip: `10.0.${i % 250}.${(i * 7) % 250}`,
      country: null, status, error_code, captures: 1, charged_units: status === 200 && i % 7 !== 0 ? 1 : 0, latency_ms: 20 + (i % 50), outcome, replayed: status === 200 && i % 7 === 0,
    };
    void store.db.audit.put([at, r.request_id], r);
  });
  return { tokens: tokens.map((t) => ({ id: t.id, name: t.name, token_prefix: t.token_prefix })), users };
}
