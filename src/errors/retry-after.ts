/** The Retry-After header of an answer that asks the client to come back: whole seconds
 * (RFC 9110 delay-seconds), the one form every answer of the service uses. */
export function retryAfter(seconds: number): { 'Retry-After': string } {
  return { 'Retry-After': String(seconds) };
}
