import t from 'tap';
import { RawConn } from '../../bench/harness/wire.ts';
import { startApi } from '../helpers/api.ts';
import { waitFor } from '../helpers/wait.ts';

// The connection cap (CONNECTIONS_PER_ADDRESS, src/http/connections.ts) refuses a client past it
// 503 server_busy on any route but the health probes: a balancer probing through an address
// that holds its cap (every client behind a proxy not in TRUSTED_PROXIES) saw the node as down,
// and /health/ready answered an error body where the contract fixes {status, modules}.
t.test('an address at its connection cap is refused 503 server_busy, but its health probes are answered', async (t) => {
  const api = await startApi({ env: { CONNECTIONS_PER_ADDRESS: '1' } });
  t.teardown(() => api.stop());
  // a login whose body never comes: the service holds its connection for it
  const stalled = new RawConn(api.port);
  await stalled.connected;
  await stalled.write('POST /auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"user');
  t.teardown(() => stalled.close());
  // the cap is reached once another request from the address is refused
  const refused = await waitFor(async () => {
    const r = await fetch(`${api.baseUrl}/v1/modules`);
    return r.status === 503 ? r : null;
  }, { what: 'the address at its cap', intervalMs: 20 });
  t.equal(((await refused.json()) as { error: { code: string } }).error.code, 'server_busy');
  for (const path of ['/health/live', '/health/ready']) {
    const r = await fetch(`${api.baseUrl}${path}`);
    const body = (await r.json()) as { status?: string };
    t.not(r.status, 503, `${path}: answered, not refused (${r.status})`);
    t.ok(typeof body.status === 'string', `${path}: its own body (${JSON.stringify(body).slice(0, 120)})`);
  }
  t.equal((await fetch(`${api.baseUrl}/v1/modules`)).status, 503, 'and the cap still holds for the rest');
});

t.test('probes that come while a readiness check runs share it: fifty at once ask the store far fewer than fifty times', async (t) => {
  const api = await startApi();
  t.teardown(() => api.stop());
  // the store's check held until released, counted
  const store = api.store as { healthy(): Promise<boolean> };
  const real = store.healthy.bind(store);
  let calls = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  store.healthy = async () => {
    calls++;
    await gate;
    return real();
  };
  const answers = Promise.all(Array.from({ length: 50 }, () => fetch(`${api.baseUrl}/health/ready`).then(async (r) => ({ status: r.status, body: (await r.json()) as { status: string } }))));
  await waitFor(() => calls >= 1, { what: 'the first readiness check' });
  release();
  const all = await answers;
  t.ok(all.every((a) => a.body.status === 'ready' || a.body.status === 'not_ready'), 'every probe gets the readiness body');
  t.ok(calls < 25, `the store was asked ${calls} times for 50 probes (once each before)`);
});
