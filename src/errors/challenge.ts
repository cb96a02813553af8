// RFC 9110 11.6.1: a 401 carries WWW-Authenticate naming the scheme it wants. The service's
// Bearer tokens (a business token, a device session token) are refused with these two codes;
// ServiceError adds the header to every error of them, so each route and verify's own answers
// carry it alike. The console's cookie session has no scheme to name, and its 401
// (invalid_session) carries none.
export const BEARER_CHALLENGE = 'Bearer realm="liveness"';

/** Whether `code` refuses a Bearer token (its answer carries the challenge). */
export function isBearerRefusal(code: string): boolean {
  return code === 'invalid_token' || code === 'invalid_session_token';
}
