import type { Config } from '../config/index.ts';

// contract.md: `Set-Cookie: <prefix>_session=<opaque>; HttpOnly; SameSite=Strict; Path=/`,
// plus Secure when COOKIE_SECURE=1. No Max-Age: the browser drops it when closed, and the
// server-side timeouts decide validity anyway.
export function cookieName(config: Config): string {
  return `${config.COOKIE_PREFIX}_session`;
}

function attributes(config: Config): string {
  return `HttpOnly; SameSite=Strict; Path=/${config.COOKIE_SECURE ? '; Secure' : ''}`;
}

export function sessionCookie(config: Config, id: string): string {
  return `${cookieName(config)}=${id}; ${attributes(config)}`;
}

export function clearedCookie(config: Config): string {
  return `${cookieName(config)}=; Max-Age=0; ${attributes(config)}`;
}

/** The session id from a Cookie header (several Cookie headers arrive joined by ", "). */
export function readSessionCookie(config: Config, header: string | undefined): string | undefined {
  if (!header) return undefined;
  const name = cookieName(config);
  for (const pair of header.split(/[;,]/)) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    if (pair.slice(0, eq).trim() === name) {
      const value = pair.slice(eq + 1).trim();
      return value.length > 0 ? value : undefined;
    }
  }
  return undefined;
}
