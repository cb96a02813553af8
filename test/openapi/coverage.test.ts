import t from 'tap';
import { buildRouter } from '../../src/http/routes/index.ts';
import type { Services } from '../../src/http/services.ts';
import { buildOpenApi } from '../../src/openapi/index.ts';

// Every route the service registers is in the document and every documented operation is a
// route: an endpoint added without its operations-table entry fails here.
t.test('the document describes exactly the routes the router serves', async (t) => {
  // registration reads nothing of the services; the handlers, which do, are never called
  const router = buildRouter({ config: {} } as unknown as Services);
  // the route table is private to the router; reading it here keeps the router's API as is
  const routes = (router as unknown as { routes: { method: string; pattern: string }[] }).routes;
  const served = new Set(routes
    .filter((r) => r.pattern !== '/admin/') // the console's trailing-slash alias of /admin
    .map((r) => `${r.method} ${r.pattern.replace(/:([a-z_]+)/g, '{$1}')}`));
  const doc = buildOpenApi() as { paths: Record<string, Record<string, unknown>> };
  const documented = new Set(Object.entries(doc.paths).flatMap(([p, item]) => Object.keys(item).map((m) => `${m.toUpperCase()} ${p}`)));
  t.same([...served].filter((r) => !documented.has(r)).sort(), [], 'routes missing from the OpenAPI document');
  t.same([...documented].filter((r) => !served.has(r)).sort(), [], 'documented operations no route serves');
  t.ok(served.size >= 29, `${served.size} routes`);
});
