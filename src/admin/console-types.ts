// The media types of the console's static files, by extension: the route serves them
// (src/http/routes/admin-console.ts) and the OpenAPI document lists them for
// /admin/static/{file} (src/openapi/admin-operations.ts), so a type added here is both served
// and documented. Here, below both, so that neither imports the other.
export const CONSOLE_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};
