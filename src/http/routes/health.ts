import type { Router } from '../router.ts';
import type { Services } from '../services.ts';
import { json, type Reply } from '../respond.ts';
import { describeUwsBuild } from '../uws.ts';

/** contract.md: live -> {status:"live"}; ready -> {status:"ready"|"not_ready", modules}.
 * Ready means the store answers and can write (not while writes fail: a full disk; with
 * PostgreSQL: and this node holds its lease) and every
 * enabled module's graphs are loaded and warm. Liveness never asks the store. */
export function healthRoutes(router: Router, s: Services): void {
  // what the last readiness answer found out about the store, so each change is logged once
  let logged: string | null = null;
  let loggedWrites: string | null = null;
  router.add('GET', '/health/live', () => json(200, { status: 'live' }));
  // One readiness check at a time per API worker, shared by the probes that come while it runs:
  // a probe is never refused by the connection cap (src/http/app.ts), and each check asks the
  // store (on PostgreSQL, a query per module and one more), so fifty probes at once from one
  // address made fifty times those queries, queued on the pool the verify calls use.
  let pending: Promise<Reply> | null = null;
  router.add('GET', '/health/ready', async () => {
    pending ??= readiness().finally(() => {
      pending = null;
    });
    return { ...(await pending) };
  });
  const readiness = async (): Promise<Reply> => {
    const store = await s.store.healthy();
    // /health/ready is unauthenticated (a balancer asks it): the answer says why the store is
    // unavailable in words that name no host; which hosts of DATABASE_URL were tried and what
    // each answered is the operator's, in the log (docs/security.md)
    const why = store ? null : (s.store.unavailableReason?.() ?? null);
    if (why && why.detail !== logged) s.log.warn({ store_error: why.detail }, 'not ready: the store is unavailable');
    logged = why?.detail ?? null;
    // the store answers reads but cannot write (a full disk): verify calls are refused
    s.store.writes.watchSpace();
    const writes = s.store.writes.failing();
    // a failed write's message may name files (a path under DATA_DIR, a PostgreSQL data file):
    // the answer leaves quoted names out, the log has the message whole
    if (writes && writes.message !== loggedWrites) s.log.warn({ operation: writes.op, error: writes.message }, 'not ready: store writes are failing');
    loggedWrites = writes?.message ?? null;
    const modules: Record<string, object> = {};
    let ready = store && !writes;
    for (const m of s.inference.readiness()) {
      // with the store down, the module switch is unknown: shown as enabled, ready is false anyway
      const enabled = store ? await s.store.moduleEnabled(m.module_id).catch(() => true) : true;
      modules[m.module_id] = {
        enabled,
        ready: m.ready,
        model_set: m.model_set,
        trained: m.trained,
        execution_provider: m.execution_provider,
        ...(m.execution_note ? { execution_note: m.execution_note } : {}),
        ...(m.error ? { error: m.error } : {}),
      };
      if (enabled && !m.ready) ready = false;
    }
    return json(ready ? 200 : 503, {
      status: ready ? 'ready' : 'not_ready',
      store: !store ? 'unavailable' : writes ? 'writes_failing' : 'ok',
      // PostgreSQL: since when no host accepts writes (a failover under way), or the lease
      ...(why ? { store_error: why.reason } : {}),
      ...(writes ? { store_writes: { since: new Date(writes.since).toISOString(), operation: writes.op, error: withoutNames(writes.message) } } : {}),
      modules,
      // what an operator comparing nodes after an upgrade needs: the runtime and the HTTP build
      server: { node: process.version, uws: describeUwsBuild() },
    });
  };
}

/** `text` with what it quotes ('/var/lib/...', "base/16384/2619") left out. */
function withoutNames(text: string): string {
  return text.replace(/'[^']*'|"[^"]*"/g, '...');
}
