// RFC 9110 11.6.1: a 401 carries WWW-Authenticate naming the scheme it wants. The service's
// Bearer tokens (a business token, a device session token) are refused with these two codes,
// on every route and in verify's own answers alike; the console's cookie session has no scheme
// to name, and its 401 (invalid_session) carries none.
export const BEARER_CHALLENGE = 'Bearer realm="liveness"';

/** The error's headers with the challenge added where its code refuses a Bearer token. */
export function withChallenge(code: string, headers: Record<string, string> | undefined): Record<string, string> | undefined {
  return code === 'invalid_token' || code === 'invalid_session_token' ? { ...headers, 'WWW-Authenticate': BEARER_CHALLENGE } : headers;
}
