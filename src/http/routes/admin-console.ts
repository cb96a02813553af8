import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONSOLE_TYPES } from '../../admin/index.ts';
import { ServiceError } from '../../errors/index.ts';
import { SOURCE_DIR } from '../../source-ext.ts';
import type { Router } from '../router.ts';

// The console is plain HTML, CSS and ES modules from src/admin/console, read once per worker.
// It talks only to /admin/api and /auth; the CSP allows nothing but this origin's own files
// and calls (no inline script or style, no frames, no form posts elsewhere). The folder is
// found from the source folder, not this module: the API worker may run as one bundled file.
const DIR = fileURLToPath(new URL('admin/console', SOURCE_DIR));
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');
const SECURITY_HEADERS = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

export function adminConsoleRoutes(router: Router): void {
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const name of fs.readdirSync(DIR)) {
    const type = CONSOLE_TYPES[path.extname(name)];
    if (type) files.set(name, { body: fs.readFileSync(path.join(DIR, name)), type });
  }
  const serve = (name: string) => {
    const f = files.get(name);
    if (!f) throw new ServiceError('not_found');
    return { status: 200, body: f.body, contentType: f.type, headers: SECURITY_HEADERS };
  };
  router.add('GET', '/admin', () => serve('index.html'));
  router.add('GET', '/admin/', () => serve('index.html'));
  // only names that exist in the folder: the parameter never becomes a path
  router.add('GET', '/admin/static/:file', (_ctx, p) => serve(p.file!));
}
