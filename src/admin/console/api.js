// The console's only way to the service: the documented admin API with the session cookie
// (sent by the browser, HttpOnly) and the session's CSRF token on state-changing calls.

let csrfToken = null;
let onUnauthorised = () => {};
let onSessionChanged = async () => null;

export function setCsrf(token) {
  csrfToken = token;
}

export function whenUnauthorised(fn) {
  onUnauthorised = fn;
}

/** `fn` re-reads the session after a 403 that says it changed under this page, and answers it
 * (null when there is none): a login in another tab gave the session a new CSRF token, and this
 * tab's every change, logging out included, answered csrf_failed until a reload; a session
 * whose account lost its admin role kept showing the admin console (review3b). */
export function whenSessionChanged(fn) {
  onSessionChanged = fn;
}

export class ApiError extends Error {
  constructor(status, body) {
    const detail = body?.detail ? body.detail.map((d) => `${d.loc.join('.')}: ${d.msg}`).join('; ') : null;
    super(body?.error?.message ? `${body.error.message} (${body.error.code})` : detail ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export async function api(method, path, body, retried = false) {
  const headers = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
  const text = await r.text();
  const data = text ? JSON.parse(text) : null;
  if (!r.ok) {
    if (r.status === 401 && path !== '/auth/login') onUnauthorised();
    const code = data?.error?.code;
    if (r.status === 403 && (code === 'csrf_failed' || code === 'forbidden') && !retried) {
      const session = await onSessionChanged().catch(() => null);
      // the same change once more with the session's current CSRF token: the operator asked for
      // it in this session, which another tab only logged into again
      if (code === 'csrf_failed' && session && method !== 'GET') return api(method, path, body, true);
    }
    throw new ApiError(r.status, data);
  }
  return data;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body);
export const patch = (path, body) => api('PATCH', path, body);
export const put = (path, body) => api('PUT', path, body);
export const del = (path) => api('DELETE', path);

/** Query string from an object, leaving out empty values. */
export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}
