/** A harness check (not a tap assertion): throws with `message` when `condition` is false. */
function expect(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}

export interface AdminSession {
  cookie: string;
  csrf: string;
  body: any;
  setCookie: string;
}

export const JSON_HEADERS = { 'content-type': 'application/json' };

export function loginRequest(baseUrl: string, username: string, password: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${baseUrl}/auth/login`, { method: 'POST', headers: { ...JSON_HEADERS, ...headers }, body: JSON.stringify({ username, password }) });
}

/** Logs in and returns the cookie pair to send back and the CSRF token. */
export async function login(baseUrl: string, username: string, password: string): Promise<AdminSession> {
  const r = await loginRequest(baseUrl, username, password);
  const body = await r.json();
  expect(r.status === 200, `login as ${username} failed: ${r.status} ${JSON.stringify(body)}`);
  const setCookie = r.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0]!, csrf: body.csrf_token, body, setCookie };
}

/** An admin API caller: cookie always, X-CSRF-Token on every call unless told otherwise. */
export function client(baseUrl: string, session: AdminSession | undefined) {
  return async (method: string, path: string, body?: unknown, opts: { csrf?: string | null; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (session) headers.cookie = session.cookie;
    const csrf = opts.csrf === undefined ? session?.csrf : opts.csrf;
    if (csrf !== null && csrf !== undefined) headers['x-csrf-token'] = csrf;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = await fetch(`${baseUrl}${path}`, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    const text = await r.text();
    let json: any;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: r.status, headers: r.headers, json, text };
  };
}
