import t from 'tap';
import { buildRouter } from '../../src/http/routes/index.ts';
import { ADMIN_API_PREFIX, Router, RouteRegistrationError } from '../../src/http/router.ts';
import type { Services } from '../../src/http/services.ts';
import { startApi } from '../helpers/api.ts';

// Security issue 29: an admin route that forgot to await the guard answered without a session
// and its rejected guard promise ended the process. The unguarded form is now refused when the
// route is registered, and every /admin/api/ route the service serves goes through the guard.

t.test('the router refuses an /admin/api/ route outside the guarded registrar', async (t) => {
  const ok = () => ({ status: 200 });
  const r = new Router(() => Promise.reject(new Error('not called at registration')));
  for (const pattern of ['/admin/api/users', '/admin/api', '/admin/api/', '/:any/api/users', '/admin/:part/users', '/*', '/admin/*', '/:a/:b']) {
    t.throws(() => r.add('GET', pattern, ok), RouteRegistrationError, `add GET ${pattern} refused`);
  }
  // paths that cannot reach /admin/api/ stay open to add
  for (const pattern of ['/admin', '/admin/', '/admin/static/:file', '/health/live', '/v1/modules/:module_id/verify', '/:a']) {
    t.doesNotThrow(() => r.add('GET', pattern, ok), `add GET ${pattern} allowed`);
  }
  // the guarded registrar takes literal /admin/api/ paths only, and only with a guard
  t.throws(() => r.admin('GET', '/health/x', ok), RouteRegistrationError, 'admin() outside /admin/api/ refused');
  t.throws(() => new Router().admin('GET', '/admin/api/x', ok), RouteRegistrationError, 'no guard, no admin route');
  t.doesNotThrow(() => r.admin('GET', '/admin/api/things/:id', ok));
  t.same(r.list().filter((x) => x.guarded).map((x) => x.pattern), ['/admin/api/things/:id']);
});

t.test('the guarded registrar awaits the guard before the handler and hands it the session', async (t) => {
  const order: string[] = [];
  const who = { key: 'k', session: {}, user: { username: 'root' } } as never;
  const r = new Router(async () => {
    order.push('guard');
    return who;
  });
  r.admin('GET', '/admin/api/x', (_ctx, _p, w) => {
    order.push('handler');
    t.equal(w, who);
    return { status: 204 };
  });
  const m = r.match('GET', '/admin/api/x');
  t.same(await m.handler({} as never, m.params), { status: 204 });
  t.same(order, ['guard', 'handler']);
  const refusing = new Router(() => Promise.reject(new Error('refused')));
  let ran = false;
  refusing.admin('POST', '/admin/api/y', () => ((ran = true), { status: 200 }));
  const m2 = refusing.match('POST', '/admin/api/y');
  await t.rejects(Promise.resolve(m2.handler({} as never, m2.params)), /refused/);
  t.notOk(ran, 'a refused guard never reaches the handler');
});

t.test('every /admin/api/ route the service registers answers 401 without a session', async (t) => {
  // registration reads nothing of the services but the config (the handlers are not called)
  const routes = buildRouter({ config: {} } as unknown as Services).list();
  const admin = routes.filter((r) => r.pattern.startsWith(ADMIN_API_PREFIX));
  t.ok(admin.length >= 15, `${admin.length} admin routes`);
  t.same(admin.filter((r) => !r.guarded), [], 'all registered through the guard');
  t.same(routes.filter((r) => r.guarded && !r.pattern.startsWith(ADMIN_API_PREFIX)), []);

  // the service's app in process (test/helpers/api.ts; was one server start): its own route
  // table is the one checked above
  const s = await startApi({ env: { ADMIN_USERNAME: 'root', ADMIN_PASSWORD: 'correct horse battery' } });
  t.teardown(() => s.stop());
  t.same(s.router.list(), routes, 'the app serves the route table checked above');
  for (const { method, pattern } of admin) {
    const path = pattern.replace(/:[a-z_]+/g, 'x');
    const hasBody = method !== 'GET' && method !== 'DELETE';
    const res = await fetch(`${s.baseUrl}${path}`, {
      method,
      headers: hasBody ? { 'content-type': 'application/json', 'x-csrf-token': 'x' } : {},
      body: hasBody ? '{}' : undefined,
    });
    const body = (await res.json()) as { error?: { code: string } };
    t.equal(res.status, 401, `${method} ${pattern}`);
    t.equal(body.error?.code, 'invalid_session', `${method} ${pattern} code`);
  }
  const live = await fetch(`${s.baseUrl}/health/live`);
  t.equal(live.status, 200, 'the process still serves');
});
